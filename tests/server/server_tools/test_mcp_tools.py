"""MCP servers' tools as server tools: the listing, the definitions and the answers of calls.

Each test runs tests/support/mcp_servers/stdio_server.py, a real MCP server over stdio (the
cases of llama.cpp's tests/unit/test_mcp_servers.py, with servers of our own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from server.server_tools.mcp.mcp_config import McpServerConfig
from server.server_tools.mcp.mcp_tools import start_mcp_tools
from server.server_tools.registry import JsonObject, ToolBox, ToolCall, ToolError
from tests.support.mcp_servers import stdio_config


@dataclass
class Started:
    """The tools of some MCP servers, in a ToolBox as the server holds them, and the log."""

    box: ToolBox
    log: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        return [tool.name for tool in self.box.tools]

    def call(self, name: str, **params: object) -> JsonObject:
        return self.box.find(name).invoke(ToolCall(params=dict(params)))


Start = Callable[..., Started]


@pytest.fixture
def start() -> Iterator[Start]:
    """start(*configs) → their tools, started as the server starts them; closed after."""
    boxes: list[ToolBox] = []

    def run(*configs: McpServerConfig) -> Started:
        log: list[str] = []
        tools, closer = start_mcp_tools(configs, log.append)
        boxes.append(ToolBox.of(tools, [closer]))
        return Started(boxes[-1], log)

    yield run
    for box in boxes:
        box.close()


ECHO_TOOLS = ["echo", "add", "fail_once", "sleep", "crash", "die", "pid", "broken", "parts"]


def test_each_tool_is_listed_as_server_underscore_tool_of_type_mcp(start: Start) -> None:
    started = start(stdio_config("echo"))
    assert started.names() == [f"echo_{name}" for name in ECHO_TOOLS]
    listed = started.box.listing()[0]
    assert listed["tool"] == listed["display_name"] == "echo_echo"
    assert listed["type"] == "mcp"
    assert listed["permissions"] == {"write": False}
    assert listed["uses_cwd"] is False


def test_a_definition_has_the_function_calling_shape(start: Start) -> None:
    started = start(stdio_config("echo"))
    echo = started.box.find("echo_echo").definition()
    assert echo == {
        "type": "function",
        "function": {
            "name": "echo_echo",
            "description": "Echo back the input message",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            },
        },
    }
    # No inputSchema, or one without properties: still an object schema with properties.
    for name in ("echo_crash", "echo_fail_once"):
        parameters = started.box.find(name).definition()["function"]["parameters"]
        assert parameters == {"type": "object", "properties": {}}


def test_calls_answer_the_text_of_the_result(start: Start) -> None:
    started = start(stdio_config("echo"))
    assert started.call("echo_echo", message="hello world") == {
        "plain_text_response": "echo: hello world"
    }
    assert started.call("echo_add", a=3, b=5) == {"plain_text_response": "8"}
    # Text parts joined by newlines; other parts (an image) are left out, as llama-server does.
    assert started.call("echo_parts") == {"plain_text_response": "one\ntwo"}


def test_the_arguments_the_headers_own_do_not_reach_the_server(start: Start) -> None:
    started = start(stdio_config("echo"))
    answer = started.call("echo_echo", message="m", cwd="/etc", runtime="x", resp_type="y")
    assert answer == {"plain_text_response": "echo: m"}


def test_errors_of_the_tool_are_tool_errors_for_the_model(start: Start) -> None:
    started = start(stdio_config("echo"))
    with pytest.raises(ToolError, match=r"^it broke$"):  # an isError result
        started.call("echo_broken")
    # A JSON-RPC error, then success from the same process: the server is kept between calls.
    with pytest.raises(ToolError, match=r"^transient error$"):
        started.call("echo_fail_once")
    assert started.call("echo_fail_once") == {"plain_text_response": "ok"}


def test_several_servers_list_their_tools_in_config_order(start: Start) -> None:
    started = start(stdio_config("echo"), stdio_config("echo2", "--page-size", "3"))
    assert started.names() == [
        f"{server}_{name}" for server in ("echo", "echo2") for name in ECHO_TOOLS
    ]
    assert started.call("echo2_add", a=1, b=2) == {"plain_text_response": "3"}


def test_a_server_that_cannot_start_offers_no_tools_and_the_others_still_do(
    start: Start,
) -> None:
    bad = McpServerConfig(name="bad", command="this_executable_does_not_exist_12345")
    started = start(bad, stdio_config("good"))
    assert started.names() == [f"good_{name}" for name in ECHO_TOOLS]
    assert any(
        "'bad'" in line and "this_executable_does_not_exist_12345" in line for line in started.log
    )


def test_a_server_with_no_tools_offers_none(start: Start) -> None:
    started = start(stdio_config("empty", "--no-tools"))
    assert started.names() == []
    assert any("'empty': 0 tools" in line for line in started.log)


@pytest.mark.parametrize(
    "misbehaviour",
    [
        ["--notify", "before"],  # a notification flushed on its own before the answer
        ["--notify", "burst"],  # the notification and the answer in one write
        ["--garbage", "--notify", "burst"],  # lines that are not JSON-RPC messages
        ["--ping"],  # the server pings us and waits for the reply before answering
        ["--stderr-kib", "256"],  # more stderr than a pipe holds, before it reads anything
    ],
)
def test_what_comes_besides_the_answer_is_never_taken_for_it(
    start: Start, misbehaviour: list[str]
) -> None:
    started = start(stdio_config("noisy", *misbehaviour, timeout_ms=10_000))
    for i in range(3):
        assert started.call("noisy_echo", message=f"m{i}") == {"plain_text_response": f"echo: m{i}"}


def test_rapid_calls_each_get_their_own_answer(start: Start) -> None:
    started = start(stdio_config("echo"))
    for i in range(20):
        assert started.call("echo_echo", message=f"msg{i}") == {
            "plain_text_response": f"echo: msg{i}"
        }


def test_ten_concurrent_calls_on_one_server_all_succeed_with_their_own_answer(
    start: Start,
) -> None:
    started = start(stdio_config("echo"))
    with ThreadPoolExecutor(max_workers=10) as pool:
        answers = list(pool.map(lambda i: started.call("echo_echo", message=f"hi{i}"), range(10)))
    assert answers == [{"plain_text_response": f"echo: hi{i}"} for i in range(10)]
    # ...and all from one process, started once.
    with ThreadPoolExecutor(max_workers=10) as pool:
        pids = set(pool.map(lambda _: str(started.call("echo_pid")), range(10)))
    assert len(pids) == 1
