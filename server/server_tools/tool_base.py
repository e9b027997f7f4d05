"""What the built-in tools share: the definition from a few class attributes, the call's runtime,
and reading the model's arguments.

The arguments come from a model, so a wrong one (missing, of the wrong type) is a `ToolError`
answered in-band: the model reads the message and can call again.
"""

from __future__ import annotations

from typing import Any, ClassVar

from server.server_tools.registry import JsonObject, ServerTool, ToolCall, ToolError
from server.server_tools.runtimes.runtime_io import Runtime
from server.server_tools.runtimes.runtimes import runtime_for


class BuiltinTool(ServerTool):
    """A built-in tool: a name, a description and parameters make its definition."""

    description: ClassVar[str] = ""
    parameters: ClassVar[dict[str, JsonObject]] = {}
    required: ClassVar[tuple[str, ...]] = ()
    uses_cwd = True

    def definition(self) -> JsonObject:
        parameters: JsonObject = {"type": "object", "properties": dict(self.parameters)}
        if self.required:
            parameters["required"] = list(self.required)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def runtime(self, call: ToolCall) -> Runtime:
        """Where this call acts (raises ToolRefused for a spec that must not be used); the
        route fills in --tools-runtime for a call that names none (ToolBox.default_runtime)."""
        return runtime_for(call.runtime, call.cwd)


def prop(kind: str, description: str) -> JsonObject:
    """One parameter of a definition."""
    return {"type": kind, "description": description}


def text_param(params: JsonObject, name: str, default: str | None = None) -> str:
    value = params.get(name, default)
    if value is None:
        raise ToolError(f"missing required parameter: {name}")
    if not isinstance(value, str):
        raise ToolError(f"parameter {name} must be a string")
    return value


def int_param(params: JsonObject, name: str, default: int) -> int:
    value: Any = params.get(name, default)
    if value is None:
        return default
    # models sometimes send numbers as strings, or 10.0 for 10
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"parameter {name} must be an integer")
    return value


def bool_param(params: JsonObject, name: str, default: bool = False) -> bool:
    value: Any = params.get(name, default)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise ToolError(f"parameter {name} must be a boolean")
    return value


def reason(err: OSError) -> str:
    """Why an OSError happened, in a few words ("No such file or directory")."""
    return err.strerror or str(err)
