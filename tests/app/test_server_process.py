from __future__ import annotations

import sys

from pytestqt.qtbot import QtBot

from app.server_process import ADMIN_TOKEN_ENV, ServerProcess
from server.dialects.routes import admin_live


def test_reports_lines_and_exit_code(qtbot: QtBot) -> None:
    process = ServerProcess()
    received: list[str] = []
    process.lines_received.connect(received.extend)
    script = "print('ready'); print('crème'); raise SystemExit(3)"
    with qtbot.waitSignal(process.exited, timeout=10000) as blocker:
        process.start(sys.executable, ["-c", script])
    assert blocker.args == [3, "failed with exit code 3"]
    assert received == ["ready", "crème"]


def test_stop_terminates_then_reports_stopped(qtbot: QtBot) -> None:
    process = ServerProcess()
    with qtbot.waitSignal(process.started, timeout=10000):
        process.start(sys.executable, ["-c", "import time; time.sleep(60)"])
    with qtbot.waitSignal(process.exited, timeout=10000) as blocker:
        process.stop()
    assert blocker.args[1] == "stopped"
    assert not process.running


def test_stop_kills_a_process_that_ignores_terminate(qtbot: QtBot) -> None:
    process = ServerProcess()
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('armed', flush=True); time.sleep(60)"
    )
    with qtbot.waitSignal(process.lines_received, timeout=10000):
        process.start(sys.executable, ["-c", script])
    with qtbot.waitSignal(process.exited, timeout=10000) as blocker:
        process.stop(grace_ms=200)
    assert blocker.args[1] == "stopped"


def test_missing_program_is_a_failure_not_a_hang(qtbot: QtBot) -> None:
    process = ServerProcess()
    with qtbot.waitSignal(process.failed, timeout=10000):
        process.start("/nonexistent/hearth-server", [])
    assert not process.running


def test_each_start_hands_the_child_a_new_admin_token_in_its_environment(qtbot: QtBot) -> None:
    process = ServerProcess()
    script = "import os, sys; print(os.environ['HEARTH_ADMIN_TOKEN']); print(sys.argv[1:])"
    tokens: list[str] = []
    for _ in range(2):
        received: list[str] = []
        process.lines_received.connect(received.extend)
        with qtbot.waitSignal(process.exited, timeout=10000):
            process.start(sys.executable, ["-c", script])
        process.lines_received.disconnect(received.extend)
        token, arguments = received
        assert token == process.admin_token and len(token) >= 32
        assert token not in arguments  # never on the command line, which `ps` shows everyone
        tokens.append(token)
    assert tokens[0] != tokens[1]
    assert ADMIN_TOKEN_ENV == admin_live.ADMIN_TOKEN_ENV  # the variable the server reads
