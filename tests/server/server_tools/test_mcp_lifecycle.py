"""MCP servers' processes: timeouts, crashes, restarts and a prompt close.

Timing is relative (a bound far below the delay the server would otherwise take) or waits on
events (a file the server writes, a process that is gone), never a fixed sleep.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server.server_tools.mcp.mcp_config import McpServerConfig
from server.server_tools.mcp.mcp_tools import start_mcp_tools
from server.server_tools.registry import JsonObject, ToolBox, ToolCall, ToolError
from tests.support.mcp_servers import STDIO_SERVER, process_gone, stdio_config, wait_until

Start = Callable[..., ToolBox]
SLOW_S = 30.0  # what the sleep tool would take, were it not cut short


@pytest.fixture
def start_with_log() -> Iterator[Start]:
    boxes: list[ToolBox] = []

    def run(*configs: McpServerConfig, log: list[str] | None = None) -> ToolBox:
        tools, closer = start_mcp_tools(configs, (log if log is not None else []).append)
        boxes.append(ToolBox.of(tools, [closer]))
        return boxes[-1]

    yield run
    for box in boxes:
        box.close()


def _call(
    box: ToolBox, name: str, stop: Callable[[], bool] | None = None, **params: object
) -> JsonObject:
    call = (
        ToolCall(params=dict(params))
        if stop is None
        else ToolCall(params=dict(params), should_stop=stop)
    )
    return box.find(name).invoke(call)


class _Background:
    """One call on a thread of its own: its answer or its ToolError, and when it ended."""

    def __init__(self, box: ToolBox, name: str, **params: object) -> None:
        self.stop = threading.Event()
        self.error: ToolError | None = None
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(box, name, params), daemon=True)
        self._thread.start()

    def _run(self, box: ToolBox, name: str, params: JsonObject) -> None:
        try:
            _call(box, name, self.stop.is_set, **params)
        except ToolError as exc:
            self.error = exc
        finally:
            self.ended.set()


def test_a_call_that_outlives_timeout_ms_is_an_error_answered_in_time(
    start_with_log: Start,
) -> None:
    box = start_with_log(stdio_config("slow", timeout_ms=500))
    began = time.monotonic()
    with pytest.raises(ToolError, match=r"did not answer tools/call in time \(timeout_ms 500\)"):
        _call(box, "slow_sleep", seconds=SLOW_S)
    assert time.monotonic() - began < SLOW_S / 10


def test_the_late_answer_to_a_call_that_timed_out_goes_to_no_other_call(
    start_with_log: Start,
) -> None:
    box = start_with_log(stdio_config("slow", timeout_ms=1000))
    assert _call(box, "slow_echo", message="warm") == {"plain_text_response": "echo: warm"}
    with pytest.raises(ToolError, match="in time"):
        _call(box, "slow_sleep", seconds=1.3)
    # Sent while the server still sleeps: it answers the sleep first, then this.
    assert _call(box, "slow_echo", message="after") == {"plain_text_response": "echo: after"}


def test_a_server_that_crashed_after_answering_is_started_again_for_the_next_call(
    start_with_log: Start,
) -> None:
    log: list[str] = []
    box = start_with_log(stdio_config("crash"), log=log)
    answer = _call(box, "crash_crash")["plain_text_response"]
    assert isinstance(answer, str) and answer.startswith("crashing ")
    crashed = int(answer.split()[1])
    assert wait_until(lambda: process_gone(crashed))
    assert _call(box, "crash_echo", message="hi2") == {"plain_text_response": "echo: hi2"}
    assert int(str(_call(box, "crash_pid")["plain_text_response"])) != crashed
    assert any("exited with code 3; starting it again" in line for line in log)


def test_a_server_that_dies_during_a_call_answers_an_error_saying_how(
    start_with_log: Start,
) -> None:
    box = start_with_log(stdio_config("fragile"))
    with pytest.raises(ToolError, match=r"exited with code 4.*fatal: dying"):
        _call(box, "fragile_die")
    assert _call(box, "fragile_echo", message="again") == {"plain_text_response": "echo: again"}


def test_close_ends_a_call_in_flight_and_the_server_at_once(
    start_with_log: Start, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    box = start_with_log(stdio_config("slow", "--started", str(started)))
    call = _Background(box, "slow_sleep", seconds=SLOW_S)
    assert wait_until(started.exists)
    began = time.monotonic()
    box.close()
    assert time.monotonic() - began < SLOW_S / 30
    assert call.ended.wait(SLOW_S / 30)
    assert call.error is not None and "was stopped" in str(call.error)
    assert wait_until(lambda: process_gone(int(started.read_text())), within_s=5)
    with pytest.raises(ToolError, match="stopping"):
        _call(box, "slow_echo", message="late")


def test_a_call_whose_client_left_ends_without_waiting_for_the_server(
    start_with_log: Start, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    box = start_with_log(stdio_config("slow", "--started", str(started)))
    call = _Background(box, "slow_sleep", seconds=SLOW_S)
    assert wait_until(started.exists)
    call.stop.set()
    assert call.ended.wait(SLOW_S / 30)
    assert call.error is not None and "cancelled" in str(call.error)


def test_a_grandchild_holding_the_pipes_holds_up_neither_start_nor_close(
    start_with_log: Start, tmp_path: Path
) -> None:
    pid_file = tmp_path / "grandchild"
    began = time.monotonic()
    box = start_with_log(stdio_config("gc", "--grandchild", str(pid_file)))
    assert time.monotonic() - began < 10  # the grandchild would hold the pipes for 60 s
    assert wait_until(lambda: process_gone(int(pid_file.read_text())), within_s=5)
    assert _call(box, "gc_echo", message="hello") == {"plain_text_response": "echo: hello"}
    grandchild = int(pid_file.read_text())
    assert not process_gone(grandchild)
    began = time.monotonic()
    box.close()
    assert time.monotonic() - began < 2
    assert wait_until(lambda: process_gone(grandchild), within_s=5)


def test_a_program_that_is_gone_is_not_tried_again_at_once(
    start_with_log: Start, tmp_path: Path
) -> None:
    script = tmp_path / "server.sh"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STDIO_SERVER}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    box = start_with_log(McpServerConfig(name="moved", command=str(script)))
    os.remove(script)
    with pytest.raises(ToolError, match="cannot start MCP server 'moved'"):
        _call(box, "moved_echo", message="x")
    with pytest.raises(ToolError, match="MCP server unavailable: moved"):
        _call(box, "moved_echo", message="x")


@pytest.mark.parametrize(
    ("program", "words"),
    [
        ("import sys; sys.stdin.read()", "did not answer initialize in time"),
        ("print('not an MCP server')", "exited with code 0"),
    ],
)
def test_a_program_that_is_no_mcp_server_offers_no_tools(
    start_with_log: Start, program: str, words: str
) -> None:
    log: list[str] = []
    config = McpServerConfig(
        name="odd", command=sys.executable, args=("-c", program), timeout_ms=500
    )
    box = start_with_log(config, log=log)
    assert box.tools == []
    assert any(words in line and "its tools are left out" in line for line in log), log
