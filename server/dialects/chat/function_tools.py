"""The function-tool definition OpenAI's chat API introduced and Ollama adopted unchanged:
`{"type": "function", "function": {"name", "description", "parameters"}}`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from server.core.templates.chat import ToolSpec


class FunctionDefinition(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None  # a JSON schema


class HasFunction(BaseModel):
    function: FunctionDefinition


def function_tools(tools: list[Any] | None) -> list[ToolSpec]:
    """Such tools as the chat layer's ToolSpecs."""
    return [
        ToolSpec(t.function.name, t.function.description, t.function.parameters or {})
        for t in tools or ()
    ]
