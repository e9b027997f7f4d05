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
view.show_live({"requests": [row], "tokens_per_second": 30.0})
before = sys.getrefcount(None)
# Each poll sets a dozen texts: a build that loses a reference per call loses thousands here,
# long before None runs out (which aborts the interpreter), so counting them is enough.
for _ in range(200):
    view.show_live({"requests": [row], "tokens_per_second": 30.0})
    view.plot.grab()
lost = before - sys.getrefcount(None)
assert lost < 500, f"{lost} references to None lost in 200 polls"
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
