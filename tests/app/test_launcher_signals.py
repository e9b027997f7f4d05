"""The launcher never leaves its server behind: closing waits for the server, SIGTERM and SIGINT
close the window like its close button, and a killed launcher takes its server with it (the
server's side of that is in tests/server/process/test_launcher_gone.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.server_process import ServerProcess
from app.signals import close_on_signals
from server.base.netcheck import port_in_use
from server.settings.config import HearthSettings
from tests.support.servers import ROOT, STARTUP_TIMEOUT, free_port

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and select")

SLEEPER = "import time; time.sleep(60)"


# -- ServerProcess: the pipe and a blocking stop ----------------------------------------------


def test_the_server_is_told_to_watch_its_stdin_and_it_stays_open(qtbot: QtBot) -> None:
    process = ServerProcess()
    script = (
        "import os, select, sys\n"
        "at_end, _, _ = select.select([sys.stdin], [], [], 0.5)\n"
        "print(os.environ.get('HEARTH_LAUNCHER_PIPE'), 'closed' if at_end else 'open', "
        "flush=True)\n"
        "sys.stdin.buffer.read()\n"
    )
    with qtbot.waitSignal(process.lines_received, timeout=10_000) as received:
        process.start(sys.executable, ["-c", script])
    assert received.args == [["1 open"]]
    process.stop_and_wait()
    assert not process.running


def test_stop_and_wait_returns_once_the_process_has_exited(qtbot: QtBot) -> None:
    process = ServerProcess()
    exits: list[tuple[int, str]] = []
    process.exited.connect(lambda code, reason: exits.append((code, reason)))
    with qtbot.waitSignal(process.started, timeout=10_000):
        process.start(sys.executable, ["-c", SLEEPER])
    process.stop_and_wait()
    assert not process.running
    assert [reason for _, reason in exits] == ["stopped"]


def test_stop_and_wait_kills_a_process_that_ignores_terminate(qtbot: QtBot) -> None:
    process = ServerProcess()
    exits: list[str] = []
    process.exited.connect(lambda _code, reason: exits.append(reason))
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('armed', flush=True); time.sleep(60)"
    )
    with qtbot.waitSignal(process.lines_received, timeout=10_000):
        process.start(sys.executable, ["-c", script])
    process.stop_and_wait(grace_ms=200)
    assert not process.running
    assert exits == ["stopped"]


def test_closing_the_window_waits_for_the_server_to_exit(qtbot: QtBot) -> None:
    window = MainWindow(HearthSettings())
    qtbot.addWidget(window)
    exits: list[str] = []
    window.server.exited.connect(lambda _code, reason: exits.append(reason))
    with qtbot.waitSignal(window.server.started, timeout=10_000):
        window.server.start(sys.executable, ["-c", SLEEPER])
    window.show()
    assert window.close()
    assert not window.server.running  # already gone when close() returns
    assert exits == ["stopped"]


# -- close_on_signals ------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_closes_the_window_and_the_old_handlers_come_back(
    qtbot: QtBot, signum: signal.Signals
) -> None:
    handlers_before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    wakeup_before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup_before)
    widget = QWidget()
    qtbot.addWidget(widget)
    widget.show()
    with close_on_signals(widget):
        os.kill(os.getpid(), signum)
        qtbot.waitUntil(lambda: not widget.isVisible(), timeout=5_000)
    assert {s: signal.getsignal(s) for s in handlers_before} == handlers_before
    assert signal.set_wakeup_fd(wakeup_before) == wakeup_before


# -- real launcher processes (tests/app/launcher_child.py) ------------------------------------


class LauncherChild:
    """`python -m tests.app.launcher_child MODE PORT FOLDER` and the lines it printed."""

    def __init__(self, mode: str, port: int, folder: Path) -> None:
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.app.launcher_child", mode, str(port), str(folder)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
        )
        self.lines: list[str] = []
        self.server_pid = 0
        self._ended = False
        self._changed = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line
                remaining = deadline - time.monotonic()
                if self._ended or remaining <= 0:
                    raise AssertionError(f"no {prefix!r} from the launcher:\n{self.output}")
                self._changed.wait(remaining)

    def wait_for_server(self) -> int:
        self.server_pid = int(self.wait_for("server-pid ", STARTUP_TIMEOUT).split()[1])
        return self.server_pid

    @property
    def output(self) -> str:
        with self._changed:
            return "\n".join(self.lines)


@pytest.fixture
def launcher_child(tmp_path: Path) -> Iterator[Callable[[str, int], LauncherChild]]:
    children: list[LauncherChild] = []

    def start(mode: str, port: int) -> LauncherChild:
        child = LauncherChild(mode, port, tmp_path)
        children.append(child)
        return child

    yield start
    for child in children:  # whatever the test left running goes, server included
        if child.process.poll() is None:
            child.process.kill()
            child.process.wait()
        if child.server_pid and not process_gone(child.server_pid):
            os.kill(child.server_pid, signal.SIGKILL)


def process_gone(pid: int) -> bool:
    """The pid has exited (a zombie left for init to reap counts as exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def wait_until(condition: Callable[[], bool], timeout: float) -> float:
    """Poll `condition` (another process's state: there is no signal to wait on); return the
    time.monotonic() at which it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.02)
    return time.monotonic()


@pytest.mark.model
def test_a_killed_launcher_takes_its_server_with_it(
    launcher_child: Callable[[str, int], LauncherChild],
) -> None:
    port = free_port()
    child = launcher_child("process", port)
    server_pid = child.wait_for_server()
    assert port_in_use("127.0.0.1", port) and not process_gone(server_pid)
    killed_at = time.monotonic()
    child.process.kill()  # SIGKILL: no handler, no cleanup, as from a task manager
    assert child.process.wait(timeout=10) == -signal.SIGKILL
    gone_at = wait_until(lambda: process_gone(server_pid), timeout=30)
    free_at = wait_until(lambda: not port_in_use("127.0.0.1", port), timeout=30)
    print(
        f"launcher SIGKILLed → server exited {gone_at - killed_at:.2f} s, "
        f"port free {free_at - killed_at:.2f} s"
    )
    assert gone_at - killed_at < 10  # aim: 2 s; loose for a busy machine


@pytest.mark.model
def test_sigterm_closes_the_launcher_and_its_server_stops_cleanly(
    launcher_child: Callable[[str, int], LauncherChild], tmp_path: Path
) -> None:
    port = free_port()
    child = launcher_child("window", port)
    server_pid = child.wait_for_server()
    signalled_at = time.monotonic()
    child.process.send_signal(signal.SIGTERM)
    code = child.process.wait(timeout=30)
    closed_at = time.monotonic()
    assert code == 0, child.output
    child.wait_for("launcher-closed", timeout=5)
    assert child.wait_for("server-exited ", timeout=0) == "server-exited 0 stopped", child.output
    assert "server| Hearth stopped." in child.lines
    assert process_gone(server_pid)
    assert not port_in_use("127.0.0.1", port)
    preferences = (tmp_path / "launcher.toml").read_text()  # saved as on the close button
    assert f"port_param = {port}" in preferences
    print(f"launcher SIGTERMed → launcher and server gone {closed_at - signalled_at:.2f} s")
    assert closed_at - signalled_at < 10
