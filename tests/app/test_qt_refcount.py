"""The guard against PySide6 6.12's lost references to None on Python 3.11 (app/qt_refcount.py):
a launcher making many Qt calls keeps running. In a child process, as the failure it prevents
aborts the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

MANY_CALLS = """
import sys
from app.qt_refcount import keep_singletons_alive
keep_singletons_alive()
from PySide6.QtWidgets import QApplication
from app.run_view import RunView
application = QApplication([])
view = RunView()
row = {"id": "kai-1", "state": "generating", "prompt_done": 5, "prompt_total": 5, "tokens": 9}
# Far more calls than None has references at start: each poll sets a dozen texts.
for _ in range(2000):
    view.show_live({"requests": [row], "tokens_per_second": 30.0})
    view.plot.grab()
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
