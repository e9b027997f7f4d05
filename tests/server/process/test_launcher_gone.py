"""The server stops itself when the launcher that started it is gone: its stdin pipe closes.

The launcher's side (a launcher killed for real, SIGTERM to a launcher) is in
tests/app/test_launcher_signals.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from server.base.netcheck import port_in_use
from server.process.parent_watch import EXIT_FORCED, stop_when_launcher_leaves
from tests.support.servers import ROOT, RunningServer

WATCH_THREAD = "hearth-launcher-watch"


class Pipe:
    """An OS pipe standing in for the server's stdin; `close_write` is the launcher dying."""

    def __init__(self) -> None:
        self.read_end, self._write_end = os.pipe()
        self._open = [self.read_end, self._write_end]

    def write(self, data: bytes) -> None:
        os.write(self._write_end, data)

    def close_write(self) -> None:
        self._close(self._write_end)

    def _close(self, fd: int) -> None:
        if fd in self._open:
            self._open.remove(fd)
            os.close(fd)

    def close(self) -> None:
        for fd in list(self._open):
            self._close(fd)


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    opened = Pipe()
    yield opened
    opened.close()


def watch_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == WATCH_THREAD]


def test_end_of_file_calls_stop_once(pipe: Pipe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEARTH_LAUNCHER_PIPE", "1")
    calls: list[str] = []
    stopped = threading.Event()

    def stop() -> None:
        calls.append("stop")
        stopped.set()

    stop_when_launcher_leaves(stop, fd=pipe.read_end, force_exit_after=None)
    pipe.write(b"anything the launcher writes is ignored\n")
    pipe.close_write()
    assert stopped.wait(10)
    for thread in watch_threads():
        thread.join(10)
    assert calls == ["stop"]
    assert not watch_threads()


def test_without_the_variable_stdin_is_not_watched(
    pipe: Pipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HEARTH_LAUNCHER_PIPE", raising=False)
    stop_when_launcher_leaves(
        lambda: pytest.fail("stopped"), fd=pipe.read_end, force_exit_after=None
    )
    assert not watch_threads()
    monkeypatch.setenv("HEARTH_LAUNCHER_PIPE", "0")
    stop_when_launcher_leaves(
        lambda: pytest.fail("stopped"), fd=pipe.read_end, force_exit_after=None
    )
    assert not watch_threads()


def test_a_shutdown_that_does_not_happen_is_forced() -> None:
    """If the graceful stop is lost, the orphan still goes (after `force_exit_after`)."""
    script = (
        "import threading\n"
        "from server.process.parent_watch import stop_when_launcher_leaves\n"
        "stop_when_launcher_leaves(lambda: print('asked', flush=True), force_exit_after=0.5)\n"
        "print('watching', flush=True)\n"
        "threading.Event().wait(60)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "HEARTH_LAUNCHER_PIPE": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline() == "watching\n"
        process.stdin.close()
        assert process.wait(timeout=30) == EXIT_FORCED
        assert process.stdout.read() == "asked\n"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_server_stops_cleanly_when_the_launcher_pipe_closes(
    start_hearth: Callable[..., RunningServer],
) -> None:
    server = start_hearth(
        ["--contextsize", "1024"], env={"HEARTH_LAUNCHER_PIPE": "1"}, stdin=subprocess.PIPE
    )
    process = server.process
    assert process is not None and process.stdin is not None
    port = int(server.base_url.rsplit(":", 1)[1])
    closed_at = time.monotonic()
    process.stdin.close()  # what the OS does when the launcher dies
    server.wait_for_output("Hearth stopped.", timeout=30)
    stopped_in = time.monotonic() - closed_at
    code = process.wait(timeout=30)  # it exits by itself: nobody kills it
    exited_in = time.monotonic() - closed_at
    output = "".join(server.output)
    assert code == 0, output
    assert "The launcher has gone; stopping." in output
    assert "Traceback" not in output
    assert not port_in_use("127.0.0.1", port)
    print(f"pipe closed → 'Hearth stopped.' {stopped_in:.2f} s, process exited {exited_in:.2f} s")
