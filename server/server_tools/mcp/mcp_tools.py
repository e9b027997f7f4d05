"""The tools of MCP servers as server tools: `<server>_<tool>`, found at startup, called over stdio.

`start_mcp_tools` is all the server needs: it starts each configured server once (all at
once), asks for its tools, stops it again, and returns one `McpTool` per tool in config order,
with the closer the ToolBox runs at shutdown. As in llama-server:
- A server that cannot be started or does not answer within min(timeout_ms, 10 s) is logged
  and offers no tools; the server starts anyway.
- The first call of one of its tools starts it again and keeps it for the calls after; one
  that has died is started again on the next call; one whose program cannot be started is not
  tried again for 5 s.
- A call answers the text parts of the MCP result, joined by newlines, as
  `{"plain_text_response": text}`. An `isError` result, a JSON-RPC error, a call that outlives
  `timeout_ms` (counted from the call, starting the server included) and a server that died
  are ToolError: `{"error": message}` with a 200, for the model to read.
- The closer ends calls in flight at once and stops every server's process group.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from server.server_tools.mcp.mcp_client import (
    McpError,
    McpNotSent,
    McpSpawnError,
    StdioSession,
    StopCheck,
)
from server.server_tools.mcp.mcp_config import Log, McpServerConfig
from server.server_tools.registry import (
    Emit,
    JsonObject,
    ServerTool,
    ToolCall,
    ToolError,
    merged_params,
)

WARMUP_LIMIT_S = 10.0  # one slow server must not hold the start up for its whole timeout
SPAWN_COOLDOWN_S = 5.0
CLOSE_GRACE_S = 0.05  # SIGTERM, then this long for the servers to go, then SIGKILL


class McpServer:
    """One configured MCP server: a session kept while calls come, a new one after it died."""

    def __init__(self, config: McpServerConfig, log: Log) -> None:
        self.config = config
        self.name = config.name
        self._log = log
        self._lock = threading.Lock()  # one caller starts a session; the others wait for it
        self._session: StdioSession | None = None
        self._starting: StdioSession | None = None  # the closer must reach a handshake too
        self._stopped = threading.Event()
        self._retry_after = 0.0

    def discover_tools(self) -> list[JsonObject]:
        """Start the server, list its tools, stop it: [] (logged) when it cannot."""
        deadline = time.monotonic() + min(self.config.timeout_ms / 1000, WARMUP_LIMIT_S)
        session = StdioSession(self.config)
        self._starting = session
        try:
            session.start()
            session.initialize(deadline, self._stopped.is_set)
            tools = session.list_tools(deadline, self._stopped.is_set)
        except McpError as exc:
            self._log(f"MCP: {exc}; its tools are left out")
            return []
        finally:
            self._starting = None
            session.close()
        self._log(f"MCP server {self.name!r}: {len(tools)} tools")
        return tools

    def call_tool(self, tool: str, arguments: JsonObject, should_stop: StopCheck) -> JsonObject:
        """The tool's answer, shaped for `/tools`. Raises ToolError."""
        deadline = time.monotonic() + self.config.timeout_ms / 1000

        def stop() -> bool:
            return self._stopped.is_set() or should_stop()

        params = {"name": tool, "arguments": arguments}
        try:
            try:
                session = self._live_session(deadline, stop)
                result = session.request("tools/call", params, deadline, stop)
            except McpNotSent:
                # It ended just before the request reached it: a fresh one can still answer.
                session = self._live_session(deadline, stop)
                result = session.request("tools/call", params, deadline, stop)
        except McpError as exc:
            raise ToolError(str(exc)) from exc
        return tool_answer(result)

    def begin_close(self) -> list[StdioSession]:
        """Refuse new calls and start stopping the processes; the sessions to finish closing."""
        self._stopped.set()
        sessions = [s for s in (self._starting, self._session) if s is not None]
        for session in sessions:
            session.begin_close()
        return sessions

    def _live_session(self, deadline: float, stop: StopCheck) -> StdioSession:
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise McpError(f"MCP server {self.name!r} did not start in time")
        try:
            if self._stopped.is_set():
                raise McpError(f"MCP server {self.name!r} is stopping")
            session = self._session
            if session is not None and session.alive:
                return session
            if session is not None:
                self._session = None
                self._log(f"MCP: {session.end_reason}; starting it again")
                session.close(grace_s=0.0)
            self._session = session = self._start_session(deadline, stop)
            if self._stopped.is_set():  # the closer may have looked before it was stored
                session.close(grace_s=0.0)
                raise McpError(f"MCP server {self.name!r} is stopping")
            return session
        finally:
            self._lock.release()

    def _start_session(self, deadline: float, stop: StopCheck) -> StdioSession:
        if time.monotonic() < self._retry_after:
            raise McpError(f"MCP server unavailable: {self.name} (it could not be started)")
        session = StdioSession(self.config)
        self._starting = session
        try:
            session.start()
            session.initialize(deadline, stop)
        except McpSpawnError as exc:
            self._retry_after = time.monotonic() + SPAWN_COOLDOWN_S
            self._log(f"MCP: {exc}")
            raise
        except McpError:
            session.close(grace_s=0.0)
            raise
        finally:
            self._starting = None
        return session


class McpTool(ServerTool):
    """One tool of an MCP server, offered as `<server>_<tool>`."""

    kind = "mcp"

    def __init__(self, server: McpServer, tool_name: str, spec: JsonObject) -> None:
        self._server = server
        self._tool_name = tool_name
        self.name = self.display_name = f"{server.name}_{tool_name}"
        description = spec.get("description")
        self._description = description if isinstance(description, str) else ""
        self._parameters = parameters_schema(spec.get("inputSchema"))

    def definition(self) -> JsonObject:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self._description,
                "parameters": self._parameters,
            },
        }

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        arguments = merged_params(call.params)
        return self._server.call_tool(self._tool_name, arguments, call.should_stop)


def parameters_schema(schema: Any) -> JsonObject:
    """The tool's `inputSchema` as function-calling parameters: always an object schema.

    llama-server passes the schema as it comes ({} when there is none); an object schema
    without `properties` gets an empty one, which function-calling clients expect.
    """
    parameters = dict(schema) if isinstance(schema, dict) else {}
    parameters.setdefault("type", "object")
    if parameters["type"] == "object":
        parameters.setdefault("properties", {})
    return parameters


def tool_answer(result: JsonObject) -> JsonObject:
    """A `tools/call` result as llama-server answers it. Raises ToolError for `isError`."""
    content = result.get("content")
    parts = content if isinstance(content, list) else []
    texts = [
        part["text"]
        for part in parts
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ]
    text = "\n".join(texts)
    if result.get("isError") is True:
        raise ToolError(text or "MCP tool returned an error")
    return {"plain_text_response": text}


def start_mcp_tools(
    configs: Sequence[McpServerConfig], log: Log
) -> tuple[list[ServerTool], Callable[[], None]]:
    """Every configured server's tools, in config order, and the closer that stops them all."""
    if not configs:
        return [], _nothing_to_close
    if os.name != "posix":
        log("MCP: stdio servers are supported on Linux and macOS only; none were started")
        return [], _nothing_to_close
    servers = [McpServer(config, log) for config in configs]
    with ThreadPoolExecutor(max_workers=min(len(servers), 8), thread_name_prefix="mcp") as pool:
        found = list(pool.map(McpServer.discover_tools, servers))
    tools: list[ServerTool] = []
    for server, specs in zip(servers, found, strict=True):
        tools.extend(_tools_of(server, specs, log))
    return tools, partial(close_servers, servers)


def _tools_of(server: McpServer, specs: list[JsonObject], log: Log) -> list[ServerTool]:
    tools: list[ServerTool] = []
    for spec in specs:
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            log(f"MCP server {server.name!r} listed a tool without a name; skipped")
            continue
        tools.append(McpTool(server, name, spec))
    return tools


def close_servers(servers: Sequence[McpServer]) -> None:
    """Stop every server at once: calls in flight end now, the processes within a moment."""
    sessions = [session for server in servers for session in server.begin_close()]
    deadline = time.monotonic() + CLOSE_GRACE_S
    for session in sessions:
        session.finish_close(deadline)


def _nothing_to_close() -> None:
    return None
