"""exec_shell_command and get_info on this machine: the answer and its exit-code line, output
streamed while the command still runs, the caps, the timeout, and a client that leaves ending
the command and everything it started."""

from __future__ import annotations

import os
import platform
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from server.server_tools.builtin.shell import ExecShellCommand, GetInfo
from server.server_tools.registry import JsonObject, ToolCall, ToolError

WAIT_S = 10.0  # the most a test waits for an event before it fails


def run(command: str, cwd: Path | None = None, **params: object) -> str:
    answer = ExecShellCommand().invoke(ToolCall({"command": command, **params}, cwd=cwd))
    text: str = answer["plain_text_response"]
    return text


class Streamed:
    """A streamed call on a thread of its own, its chunks in a queue as they come."""

    def __init__(
        self, command: str, cwd: Path, should_stop: Callable[[], bool] = lambda: False
    ) -> None:
        self.chunks: queue.Queue[str] = queue.Queue()
        self.answer: JsonObject | None = None
        call = ToolCall({"command": command, "timeout": 30}, cwd=cwd, should_stop=should_stop)
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: ToolCall) -> None:
        self.answer = ExecShellCommand().invoke(call, self.chunks.put)

    def wait_for(self, text: str) -> str:
        seen = ""
        while text not in seen:
            seen += self.chunks.get(timeout=WAIT_S)
        return seen

    def rest(self) -> str:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()
        pieces = []
        while not self.chunks.empty():
            pieces.append(self.chunks.get())
        return "".join(pieces)


def test_the_answer_ends_with_the_exit_code() -> None:
    assert run("echo hello") == "hello\n\n[exit code: 0]"
    assert run("echo oops >&2; exit 3") == "oops\n\n[exit code: 3]"


def test_the_command_runs_in_the_cwd(tmp_path: Path) -> None:
    run("echo hello > marker.txt", cwd=tmp_path)
    assert (tmp_path / "marker.txt").read_text() == "hello\n"
    with pytest.raises(ToolError, match="failed to run the command in"):
        run("true", cwd=tmp_path / "missing")


def test_output_past_the_cap_is_dropped_with_a_note() -> None:
    text = run("head -c 100000 /dev/zero | tr '\\0' a", max_output_size=100)
    assert text == "a" * 100 + "\n[output truncated]\n[exit code: 0]"


def test_chunks_arrive_while_the_command_still_runs(tmp_path: Path) -> None:
    command = "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second"
    streamed = Streamed(command, tmp_path)
    assert "first" in streamed.wait_for("first")
    assert streamed.thread.is_alive()  # still waiting for the file
    (tmp_path / "go").touch()
    rest = streamed.rest()
    assert rest == "second\n\n[exit code: 0]"
    assert streamed.answer == {}


def test_a_stop_ends_the_command_and_its_background_jobs(tmp_path: Path) -> None:
    stop = threading.Event()
    command = "sleep 30 & echo $! > bg.pid; echo started; sleep 30"
    streamed = Streamed(command, tmp_path, should_stop=stop.is_set)
    streamed.wait_for("started")
    began = time.monotonic()
    stop.set()
    rest = streamed.rest()
    assert time.monotonic() - began < 5  # long before the command's 30 s
    assert "[exit code" not in rest  # nobody is left to read it
    background = int((tmp_path / "bg.pid").read_text())
    assert _gone(background)


def test_a_command_past_its_timeout_is_ended_even_if_it_ignores_sigterm() -> None:
    began = time.monotonic()
    text = run("trap '' TERM; echo waiting; sleep 20", timeout=1)
    assert time.monotonic() - began < 10
    assert text.startswith("waiting\n")
    assert text.endswith("[exit due to timed out]")


def test_get_info_names_the_system_and_the_cwd(tmp_path: Path) -> None:
    info = GetInfo().invoke(ToolCall({}, cwd=tmp_path))
    assert platform.system() in info["os"]
    assert info["cwd"] == str(tmp_path)
    assert GetInfo().invoke(ToolCall({}))["cwd"] == os.getcwd()


def _gone(pid: int) -> bool:
    """Whether a process has ended (a zombie waiting for its reaper counts as ended)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat")
            if stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.02)
    return False
