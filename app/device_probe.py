"""DeviceProbe: runs `hearth list-devices --json` once and reports the devices it found.

A child process, not a call in the launcher: asking a GPU driver about its devices loads
llama.cpp's libraries and the driver, which can take seconds or crash on a broken driver; the
window stays responsive and alive either way. Widgets get the result through `found`.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QObject, QProcess, Signal

from app.paths import hearth_command
from server.devices.listing import ListedDevice

PROBE_TIMEOUT_MS = 60_000  # a hung driver must not keep the process forever


class DeviceProbe(QObject):
    found = Signal(list)  # list[ListedDevice]
    failed = Signal(str)  # why the list is unknown, in one line

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._process: QProcess | None = None

    def start(self) -> None:
        if self._process is not None:
            return
        program, arguments = hearth_command(["list-devices", "--json"])
        process = QProcess(self)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.SeparateChannels)
        process.finished.connect(self._finished)
        process.errorOccurred.connect(self._error)
        self._process = process
        process.start(program, arguments)

    def stop(self) -> None:
        """Called when the launcher closes: a probe still running is not waited for."""
        process, self._process = self._process, None
        if process is not None and process.state() != QProcess.ProcessState.NotRunning:
            process.kill()
            process.waitForFinished(2000)

    def _finished(self, exit_code: int, status: QProcess.ExitStatus) -> None:
        process = self._process
        if process is None:
            return
        output = bytes(process.readAllStandardOutput().data()).decode("utf-8", "replace")
        if status != QProcess.ExitStatus.NormalExit or exit_code != 0:
            error = bytes(process.readAllStandardError().data()).decode("utf-8", "replace")
            last = (error.strip().splitlines() or ["no message"])[-1]
            self.failed.emit(f"listing devices failed (exit {exit_code}): {last}")
            return
        try:
            lines = [line for line in output.splitlines() if line.startswith("[")]
            devices = [ListedDevice(**entry) for entry in json.loads(lines[-1])]
        except (IndexError, ValueError, TypeError) as exc:
            self.failed.emit(f"listing devices gave no readable answer: {exc}")
            return
        self.found.emit(devices)

    def _error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self.failed.emit("listing devices could not start")
