"""The Qt bindings keep their references: PySide6 6.12.0 gives back a reference to None for
every Qt call that returns None, and on Python 3.11 (None not yet immortal) the launcher's
live view then aborts the interpreter within minutes (pyproject.toml keeps 6.12 out). In a
child process, as the failure aborts the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.servers import ROOT

MANY_CALLS = """
import sys
from PySide6.QtWidgets import QApplication
from app.run_view import RunView
application = QApplication([])
view = RunView()
row = {"id": "kai-1", "state": "generating", "prompt_done": 5, "prompt_total": 5, "tokens": 9}
# Far more calls than None has references at start: each poll sets a dozen texts.
for _ in range(2000):
    view.show_live({"requests": [row], "tokens_per_second": 30.0})
    view.plot.grab()
assert sys.getrefcount(None) > 1000, "the references to None are running out"
print("still running")
"""


def test_many_qt_calls_do_not_abort_the_launcher() -> None:
    environment = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", MANY_CALLS],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "still running"
