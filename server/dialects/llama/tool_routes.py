"""llama-server's `/tools`: the tools the server itself runs for an agent (server/server_tools).

`GET /tools` lists them; `POST /tools {"tool", "params", "stream"}` runs one on a worker thread
and answers its JSON, or with `stream` (exec_shell_command) an SSE stream of `{"chunk"}` events
ending in `{"done": true}`, with `"error"` when it failed. The `x-tool-cwd` header says where
the tool runs (a `cwd` in the params is dropped: the client decides, not the model),
`x-tool-runtime` in what (else --tools-runtime), `x-resp-type` how read_file answers.

Answers, as llama-server's: a tool's own failure is a 200 `{"error": ...}` (the model reads
it); an unknown tool a 404; a call refused before it runs (an unknown runtime, an option
smuggled into a container id) a 500. Without --tools or MCP servers both routes answer
llama-server's 403 `feature_disabled`. A client that leaves stops the tool (its shell command
is killed), and so does the server stopping (server/process/http_server.py closes the tools
first).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import ServerSentEvent

from server.dialects.edge.deps import key_required
from server.dialects.edge.errors import APIError, Dialect, ErrorKind
from server.dialects.llama.proxy_routes import feature_disabled
from server.dialects.llama.schemas import LlamaBase
from server.dialects.pipeline.routing import Served, json_route
from server.dialects.streams.streaming import sse_response, unless_disconnected
from server.dialects.streams.wire import sse_json
from server.server_tools.registry import (
    JsonObject,
    ServerTool,
    ToolBox,
    ToolCall,
    ToolError,
    ToolRefused,
    UnknownTool,
    merged_params,
)

logger = logging.getLogger("hearth")
router = APIRouter(tags=["llama-server"])
OPENAI = Dialect.OPENAI


class ToolRequest(LlamaBase):
    """POST /tools."""

    tool: str
    params: dict[str, Any] = {}
    stream: bool = False


@router.get("/tools", dependencies=[key_required(OPENAI)], name="list_tools")
async def list_tools(request: Request) -> Response:
    """The tools this server runs, each with its function-calling definition."""
    return JSONResponse(_tool_box(request).listing())


@json_route(router, "/tools", ToolRequest, OPENAI)
async def call_tool(body: ToolRequest, served: Served) -> Response:
    """Run one tool: its JSON answer, or its output as a stream."""
    box = _tool_box(served.request)
    try:
        tool = box.find(body.tool, stream=body.stream)
    except UnknownTool as exc:
        raise APIError(404, str(exc), ErrorKind.NOT_FOUND, OPENAI) from None
    stop = threading.Event()
    runtime = served.request.headers.get("x-tool-runtime") or await _box_runtime(box)
    call = _call_of(body, served, runtime, lambda: stop.is_set() or box.closed)
    if body.stream:
        return sse_response(_streamed(tool, call, stop), asyncio.Event())
    try:
        answer = await unless_disconnected(served.request, to_thread.run_sync(_run, tool, call))
    finally:
        stop.set()  # a client that left: the tool stops too
    return JSONResponse(answer)


def _tool_box(request: Request) -> ToolBox:
    box: ToolBox | None = request.app.state.tool_box
    if box is None:
        raise feature_disabled()
    return box


async def _box_runtime(box: ToolBox) -> str | None:
    """--tools-runtime's place (a container Hearth started may have to start again)."""
    try:
        return await to_thread.run_sync(box.default_runtime)
    except ToolRefused as exc:
        raise APIError(500, str(exc), ErrorKind.SERVER, OPENAI) from None


def _call_of(
    body: ToolRequest, served: Served, runtime: str | None, should_stop: Callable[[], bool]
) -> ToolCall:
    headers = served.request.headers
    cwd = headers.get("x-tool-cwd")
    return ToolCall(
        merged_params(body.params),
        cwd=Path(cwd) if cwd else None,
        runtime=runtime,
        resp_type=headers.get("x-resp-type") or None,
        should_stop=should_stop,
    )


def _run(tool: ServerTool, call: ToolCall) -> JsonObject:
    """The tool's answer, or its failure as llama-server answers it."""
    try:
        return tool.invoke(call)
    except ToolError as exc:
        return {"error": str(exc)}
    except ToolRefused as exc:
        raise APIError(500, str(exc), ErrorKind.SERVER, OPENAI) from None
    except Exception as exc:  # a tool's bug must not look like a dropped connection
        logger.exception("hearth: tool %s failed", tool.name)
        raise APIError(500, str(exc) or type(exc).__name__, ErrorKind.SERVER, OPENAI) from None


async def _streamed(
    tool: ServerTool, call: ToolCall, stop: threading.Event
) -> AsyncIterator[Sequence[ServerSentEvent] | None]:
    """`{"chunk"}` events as the tool emits them, then `{"done": true[, "error"]}`."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[JsonObject] = asyncio.Queue()

    def put(event: JsonObject) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is reading
            loop.call_soon_threadsafe(events.put_nowait, event)

    def run() -> None:
        ending: JsonObject = {"done": True}
        try:
            tool.invoke(call, lambda chunk: put({"chunk": chunk}) if chunk else None)
        except Exception as exc:
            if not isinstance(exc, (ToolError, ToolRefused)):
                logger.exception("hearth: tool %s failed", tool.name)
            ending["error"] = str(exc) or "An unknown error occurred"
        put(ending)

    worker = asyncio.ensure_future(to_thread.run_sync(run))
    try:
        while True:
            event = await events.get()
            yield [sse_json(event)]
            if event.get("done"):
                return
    finally:
        stop.set()
        if worker.done():
            worker.result()
