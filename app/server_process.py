"""ServerProcess: the one object that owns the server subprocess (a QProcess).

Widgets connect to its signals and call start/stop; they never touch the process. Output is
read as bytes, assembled into whole UTF-8 lines, and emitted in batches so a fast log cannot
flood the event loop. Stop asks politely (SIGTERM; the server shuts down cleanly), then kills
after a grace period, without blocking the GUI thread; `stop_and_wait` does the same but
blocks, for closing the launcher.

The server's stdin is a pipe that stays open for the launcher's whole life (the write channel
is never closed), and `HEARTH_LAUNCHER_PIPE=1` tells the server to watch it: when the launcher
dies in any way, the OS closes the pipe and the server shuts itself down
(`server/process/parent_watch.py`), so no orphan keeps the port.

Each start also hands the server a fresh random admin token in `HEARTH_ADMIN_TOKEN` (in the
environment, which other users cannot read, never on the command line, which they can see in
`ps`): it opens the server's live view of requests (`/api/admin/requests`, `/api/admin/abort`)
to this launcher alone.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from app.log_buffer import LineAssembler

# The variable server/dialects/routes/admin_live.py reads (the launcher does not import the server's
# API).
ADMIN_TOKEN_ENV = "HEARTH_ADMIN_TOKEN"
STOP_GRACE_MS = 5000
KILL_WAIT_MS = 5000  # after SIGKILL; only an unkillable process takes longer


class ServerProcess(QObject):
    """Runs `program arguments`; reports lines, start, exit (code + reason) and failures."""

    started = Signal()
    lines_received = Signal(list)  # list[str], in order
    exited = Signal(int, str)  # exit code, human-readable reason
    failed = Signal(str)  # could not start at all

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._process: QProcess | None = None
        self._lines = LineAssembler()
        self._stop_requested = False
        self.last_lines: list[str] = []
        self.admin_token = ""  # the running server's, new at each start

    @property
    def running(self) -> bool:
        return (
            self._process is not None and self._process.state() != QProcess.ProcessState.NotRunning
        )

    def process_id(self) -> int:
        return int(self._process.processId()) if self._process is not None else 0

    def start(self, program: str, arguments: list[str], working_dir: Path | None = None) -> None:
        if self.running:
            return
        process = QProcess(self)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        environment = QProcessEnvironment.systemEnvironment()
        environment.insert("PYTHONUNBUFFERED", "1")  # lines as they happen, not in blocks
        environment.insert("PYTHONIOENCODING", "utf-8")
        # The default managed input channel keeps stdin's pipe open until this process dies.
        environment.insert("HEARTH_LAUNCHER_PIPE", "1")
        self.admin_token = secrets.token_urlsafe(32)
        environment.insert(ADMIN_TOKEN_ENV, self.admin_token)
        process.setProcessEnvironment(environment)
        if working_dir is not None:
            process.setWorkingDirectory(str(working_dir))
        process.readyReadStandardOutput.connect(self._read_output)
        process.started.connect(self.started)
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        self._process = process
        self._lines = LineAssembler()
        self._stop_requested = False
        self.last_lines = []
        process.start(program, arguments)

    def stop(self, grace_ms: int = STOP_GRACE_MS) -> None:
        """Ask the server to shut down; kill it if it has not after `grace_ms`."""
        if not self.running or self._process is None:
            return
        self._stop_requested = True
        if sys.platform == "win32":
            self._process.kill()  # no SIGTERM there
            return
        self._process.terminate()
        process = self._process
        QTimer.singleShot(grace_ms, lambda: self._kill_if_running(process))

    def stop_and_wait(self, grace_ms: int = STOP_GRACE_MS) -> None:
        """Stop and block until the server has exited: terminate, wait up to `grace_ms`,
        then kill. For closing the launcher, which must not quit with the server mid-shutdown
        (QProcess's destructor would kill it)."""
        process = self._process
        if process is None or not self.running:
            return
        self._stop_requested = True
        if sys.platform != "win32":  # no SIGTERM there
            process.terminate()
            if process.waitForFinished(grace_ms):
                return
        if process.state() != QProcess.ProcessState.NotRunning:
            process.kill()
            process.waitForFinished(KILL_WAIT_MS)

    def _kill_if_running(self, process: QProcess) -> None:
        if process is self._process and self.running:
            process.kill()

    def _read_output(self) -> None:
        if self._process is None:
            return
        lines = self._lines.feed(bytes(self._process.readAllStandardOutput().data()))
        self._publish(lines)

    def _publish(self, lines: list[str]) -> None:
        if lines:
            self.last_lines = (self.last_lines + lines)[-20:]
            self.lines_received.emit(lines)

    def _on_finished(self, exit_code: int, status: QProcess.ExitStatus) -> None:
        self._read_output()
        self._publish(self._lines.flush())
        if self._stop_requested:
            reason = "stopped"
        elif status == QProcess.ExitStatus.CrashExit:
            reason = "crashed or was killed"
        elif exit_code == 0:
            reason = "exited"
        else:
            reason = f"failed with exit code {exit_code}"
        self._process = None
        self.exited.emit(exit_code, reason)

    def _on_error(self, error: QProcess.ProcessError) -> None:
        # FailedToStart never reaches `finished`, so it must end the run here.
        if error == QProcess.ProcessError.FailedToStart and self._process is not None:
            message = self._process.errorString()
            self._process = None
            self.failed.emit(message)
