"""What a server tool is, one call of it, and the set of tools a server offers.

The wire shapes are llama-server's (tools/server/server-tools.cpp): `GET /tools` lists
`ServerTool.describe()` for each tool; `POST /tools {"tool", "params", "stream"}` answers the
tool's JSON, or with `stream` an SSE stream of `{"chunk"}` events ending in `{"done": true}`
(with `"error"` when it failed). A tool's own failure (a file that is missing, an edit that
does not match) is `ToolError`, answered as `{"error": message}` with a 200 so that the model
reads it; a call that must not run at all (an unknown runtime, an option smuggled into an ssh
target) is `ToolRefused`, llama-server's 500.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JsonObject = dict[str, Any]
# Receives one piece of a streamed tool's output (exec_shell_command's stdout, as it comes).
Emit = Callable[[str], None]


class ToolError(Exception):
    """The tool ran and failed: the answer is `{"error": str(self)}`, status 200."""


class ToolRefused(Exception):
    """The call was refused before the tool ran: llama-server's 500 with this message."""


class UnknownTool(LookupError):
    """No tool by that name (or it cannot stream and a stream was asked): a 404."""


def _never() -> bool:
    return False


def _no_runtime() -> str | None:
    return None


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's own arguments and where it runs.

    `cwd` comes from the `x-tool-cwd` header only (a `cwd` the model put in the arguments is
    dropped: the client, not the model, says where tools run); relative paths resolve against
    it, and without it against the server's working directory. `runtime` is the
    `x-tool-runtime` header, else `--tools-runtime`, else None (this machine). `should_stop`
    turns true when the client has gone or the server is stopping.
    """

    params: JsonObject
    cwd: Path | None = None
    runtime: str | None = None
    resp_type: str | None = None
    should_stop: Callable[[], bool] = _never


class ServerTool(ABC):
    """One tool. Subclasses set the class attributes and write `definition` and `invoke`."""

    name: str = ""
    display_name: str = ""
    kind: str = "server"  # llama-server's "type": "server" (built in) or "mcp"
    permission_write: bool = False
    support_stream: bool = False
    uses_cwd: bool = False

    @abstractmethod
    def definition(self) -> JsonObject:
        """The OpenAI function-calling definition: {"type": "function", "function": {...}}."""

    @abstractmethod
    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        """Run the tool (on a worker thread) and return its JSON answer.

        `emit` is given only to a tool with `support_stream` when the client asked for a
        stream; such a tool sends its output through it as it comes and may return {}.
        Raises ToolError for the tool's own failures and ToolRefused for calls that must
        not run.
        """

    def describe(self) -> JsonObject:
        """The tool's entry in `GET /tools`."""
        return {
            "display_name": self.display_name or self.name,
            "tool": self.name,
            "type": self.kind,
            "permissions": {"write": self.permission_write},
            "uses_cwd": self.uses_cwd,
            "definition": self.definition(),
        }


@dataclass
class ToolBox:
    """The tools this server offers, in listing order, and what must happen at shutdown.

    `closers` are called once by `close()` (the MCP servers' processes are stopped there); a
    closer must return promptly even while a call is in flight, which it then ends.
    `default_runtime` is where a call without `x-tool-runtime` runs (--tools-runtime; for a
    container Hearth started, its current id, so it may block while one is started again).
    """

    tools: list[ServerTool] = field(default_factory=list)
    closers: list[Callable[[], None]] = field(default_factory=list)
    default_runtime: Callable[[], str | None] = _no_runtime
    _closed: threading.Event = field(default_factory=threading.Event, repr=False)

    @classmethod
    def of(
        cls,
        tools: Iterable[ServerTool],
        closers: Iterable[Callable[[], None]] = (),
        default_runtime: Callable[[], str | None] = _no_runtime,
    ) -> ToolBox:
        box = cls(default_runtime=default_runtime)
        for tool in tools:
            box.add(tool)
        box.closers.extend(closers)
        return box

    def add(self, tool: ServerTool) -> bool:
        """Add a tool unless one of that name is already here (then False: the first wins)."""
        if any(existing.name == tool.name for existing in self.tools):
            return False
        self.tools.append(tool)
        return True

    def listing(self) -> list[JsonObject]:
        return [tool.describe() for tool in self.tools]

    def find(self, name: str, *, stream: bool = False) -> ServerTool:
        for tool in self.tools:
            if tool.name == name:
                if stream and not tool.support_stream:
                    raise UnknownTool(f"tool {name!r} does not support streaming")
                return tool
        raise UnknownTool(f"tool not found: {name}")

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for closer in self.closers:
            closer()


def merged_params(params: Mapping[str, Any]) -> JsonObject:
    """The arguments as the tool sees them: the keys the headers own are dropped."""
    return {
        key: value for key, value in params.items() if key not in ("cwd", "runtime", "resp_type")
    }
