"""llama-server's `/tools` route over real HTTP (server/dialects/llama/tool_routes.py), with
tools written here so that each answer path shows: the listing, a call's arguments and
headers, a tool's own failure (200 `{"error"}`), a refused call (500), an unknown tool (404),
a stream whose chunks arrive while the tool still runs, a client that leaves stopping the tool,
the route off without --tools (403), and the default CORS origins narrowed to this machine.
The real tools are tested in tests/server/server_tools; llama.cpp's own cases for them run
in `make compat` (unit/test_tools_builtin.py, unit/test_mcp_servers.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from server.server_tools.registry import (
    Emit,
    JsonObject,
    ServerTool,
    ToolBox,
    ToolCall,
    ToolError,
    ToolRefused,
)
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

Serve = Callable[..., RunningServer]
EVENT_WAIT = 30  # seconds: only reached when the behaviour under test is broken


class RecordingTool(ServerTool):
    """Answers what it was called with, or fails as its `fail` says."""

    name = "record"
    display_name = "Record"
    uses_cwd = True

    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.calls: list[ToolCall] = []

    def definition(self) -> JsonObject:
        parameters = {"type": "object", "properties": {"x": {"type": "integer"}}}
        return {"type": "function", "function": {"name": self.name, "parameters": parameters}}

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        self.calls.append(call)
        if self.fail is not None:
            raise self.fail
        return {"params": call.params, "cwd": str(call.cwd), "runtime": call.runtime}


class TalkingTool(ServerTool):
    """Streams a first chunk, waits until told to go on (or to stop), then a second."""

    name = "talk"
    support_stream = True
    permission_write = True

    def __init__(self) -> None:
        self.go_on = threading.Event()
        self.saw_stop = threading.Event()

    def definition(self) -> JsonObject:
        return {"type": "function", "function": {"name": self.name, "parameters": {}}}

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        assert emit is not None
        emit("first ")
        while not self.go_on.wait(0.01):
            if call.should_stop():
                self.saw_stop.set()
                raise ToolError("stopped")
        emit("second")
        if call.params.get("fail"):
            raise ToolError("it broke at the end")
        return {}


def serve_tools(
    serve_engine: Serve, *tools: ServerTool, runtime: str | None = None, **settings: Any
) -> RunningServer:
    box = ToolBox.of(tools, default_runtime=lambda: runtime)
    return serve_engine(ScriptedEngine(), HearthSettings(**settings), tool_box=box)


def call(server: RunningServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{server.base_url}/tools", json=body, headers=headers, timeout=EVENT_WAIT)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_without_tools_the_route_answers_llama_servers_403(
    serve_engine: Serve, method: str
) -> None:
    server = serve_engine(ScriptedEngine())
    response = httpx.request(method, f"{server.base_url}/tools", json={"tool": "read_file"})
    assert response.status_code == 403
    assert response.json()["error"]["type"] == "feature_disabled"


def test_the_listing_describes_each_tool(serve_engine: Serve) -> None:
    server = serve_tools(serve_engine, RecordingTool(), TalkingTool())
    listing = httpx.get(f"{server.base_url}/tools").json()
    assert [entry["tool"] for entry in listing] == ["record", "talk"]
    record, talk = listing
    assert record["display_name"] == "Record" and talk["display_name"] == "talk"
    assert record["type"] == "server" and record["uses_cwd"] is True
    assert talk["permissions"] == {"write": True}
    assert record["definition"]["function"]["parameters"]["properties"] == {
        "x": {"type": "integer"}
    }


def test_a_call_gets_its_params_and_the_headers_not_the_models_cwd(
    serve_engine: Serve, tmp_path: Any
) -> None:
    tool = RecordingTool()
    server = serve_tools(serve_engine, tool, runtime="ssh:box")
    body = {"tool": "record", "params": {"x": 1, "cwd": "/elsewhere", "runtime": "x"}}
    answer = call(server, body, **{"x-tool-cwd": str(tmp_path)}).json()
    assert answer == {"params": {"x": 1}, "cwd": str(tmp_path), "runtime": "ssh:box"}
    answer = call(server, body, **{"x-tool-runtime": "docker-container:abc"}).json()
    assert answer["cwd"] == "None" and answer["runtime"] == "docker-container:abc"


def test_a_tools_own_failure_is_a_200_the_model_can_read(serve_engine: Serve) -> None:
    server = serve_tools(serve_engine, RecordingTool(ToolError("no such file: a.txt")))
    response = call(server, {"tool": "record", "params": {}})
    assert response.status_code == 200
    assert response.json() == {"error": "no such file: a.txt"}


@pytest.mark.parametrize(
    ("fail", "status"), [(ToolRefused("invalid ssh target"), 500), (KeyError("bug"), 500)]
)
def test_a_refused_or_broken_call_is_a_500(
    serve_engine: Serve, fail: Exception, status: int
) -> None:
    server = serve_tools(serve_engine, RecordingTool(fail))
    response = call(server, {"tool": "record"})
    assert response.status_code == status
    assert response.json()["error"]["type"] == "server_error"
    assert str(fail).strip("'") in response.json()["error"]["message"]


def test_unknown_tools_and_bad_bodies(serve_engine: Serve) -> None:
    server = serve_tools(serve_engine, RecordingTool())
    missing = call(server, {"tool": "nope"})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    assert call(server, {"params": {}}).status_code == 400
    not_streaming = call(server, {"tool": "record", "stream": True})
    assert not_streaming.status_code == 404


def test_a_stream_sends_chunks_while_the_tool_runs(serve_engine: Serve) -> None:
    tool = TalkingTool()
    server = serve_tools(serve_engine, tool)
    body = {"tool": "talk", "stream": True}
    with httpx.stream("POST", f"{server.base_url}/tools", json=body, timeout=EVENT_WAIT) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        events = iter_sse(reply)
        assert next(events).json() == {"chunk": "first "}
        tool.go_on.set()  # only now can the second chunk exist
        rest = [event.json() for event in events if event.data]
    assert rest == [{"chunk": "second"}, {"done": True}]


def test_a_streamed_failure_ends_with_its_error(serve_engine: Serve) -> None:
    tool = TalkingTool()
    tool.go_on.set()
    server = serve_tools(serve_engine, tool)
    body = {"tool": "talk", "stream": True, "params": {"fail": True}}
    with httpx.stream("POST", f"{server.base_url}/tools", json=body, timeout=EVENT_WAIT) as reply:
        events = [event.json() for event in iter_sse(reply) if event.data]
    assert events[-1] == {"done": True, "error": "it broke at the end"}


def test_a_client_that_leaves_a_stream_stops_the_tool(serve_engine: Serve) -> None:
    tool = TalkingTool()
    server = serve_tools(serve_engine, tool)
    body = {"tool": "talk", "stream": True}
    with httpx.stream("POST", f"{server.base_url}/tools", json=body, timeout=EVENT_WAIT) as reply:
        assert next(iter_sse(reply)).json() == {"chunk": "first "}
    assert tool.saw_stop.wait(EVENT_WAIT)


def test_closing_the_tool_box_stops_a_call_in_flight(serve_engine: Serve) -> None:
    tool = TalkingTool()
    box = ToolBox.of([tool])
    server = serve_engine(ScriptedEngine(), HearthSettings(), tool_box=box)
    body = {"tool": "talk", "stream": True}
    with httpx.stream("POST", f"{server.base_url}/tools", json=body, timeout=EVENT_WAIT) as reply:
        events = iter_sse(reply)
        assert next(events).json() == {"chunk": "first "}
        box.close()  # what the server's shutdown does first
        assert [event.json() for event in events if event.data][-1] == {
            "done": True,
            "error": "stopped",
        }
    assert tool.saw_stop.is_set()


def preflight(server: RunningServer, origin: str) -> httpx.Response:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "Authorization",
    }
    return httpx.options(f"{server.base_url}/completions", headers=headers)


def test_with_tools_on_only_pages_of_this_machine_may_call(serve_engine: Serve) -> None:
    """unit/test_security.py::test_cors_origins_defaults_to_localhost_with_tools_enabled."""
    server = serve_tools(serve_engine, RecordingTool(), server_tools="all")
    local = preflight(server, "http://localhost:8080")
    assert local.headers["Access-Control-Allow-Origin"] == "http://localhost:8080"
    assert "Access-Control-Allow-Origin" not in preflight(server, "http://evil.com").headers
    # --cors-origins said outright still wins, and without tools any page may call
    wide = serve_tools(serve_engine, RecordingTool(), server_tools="all", cors_origins="*")
    assert "Access-Control-Allow-Origin" in preflight(wide, "http://evil.com").headers
    plain = serve_engine(ScriptedEngine())
    assert "Access-Control-Allow-Origin" in preflight(plain, "http://evil.com").headers


def test_the_tools_settings_from_the_command_line() -> None:
    argv = ["--tools", "read_file, grep_search", "--mcp-servers-json", "{}"]
    settings = parse_command_line(argv).settings
    assert settings.server_tool_names() == ["read_file", "grep_search"]
    assert settings.server_tools_wanted()
    assert not HearthSettings().server_tools_wanted()
    assert HearthSettings().cors_origin_list() == ["*"]
    assert HearthSettings().cors_origin_list(tools_on=True) == ["localhost"]


def test_errors_before_the_route_runs_are_in_llama_servers_shape(serve_engine: Serve) -> None:
    """/tools is llama-server's path: a wrong method or body answers in its (OpenAI) shape."""
    server = serve_tools(serve_engine, RecordingTool())
    wrong_method = httpx.put(f"{server.base_url}/tools")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["type"] == "invalid_request_error"
    not_json = httpx.post(f"{server.base_url}/tools", content=b"{nope")
    assert not_json.status_code == 400 and "error" in not_json.json()
