"""A real launcher process for tests to kill: `python -m tests.app.launcher_child MODE PORT DIR`.

Offscreen, it starts the real server on PORT (the bundled model, context 1024) and prints
`server-pid N` once the server answers HTTP, then runs the Qt loop until it is closed or
killed. Server lines are echoed as `server| …`, and the server's exit as
`server-exited CODE REASON`.

MODE `process`: only `app.server_process.ServerProcess`, started with `app.paths.server_command`
on a `.kcpps` written into DIR. MODE `window`: `MainWindow` (launched as the Launch button
does, preferences in DIR) with `close_on_signals`, as `run_launcher` sets it up.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx


def say(text: str) -> None:
    print(text, flush=True)


def main(mode: str, port: int, folder: Path) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["HEARTH_CONFIG_DIR"] = str(folder)
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.main_window import MainWindow
    from app.paths import server_command
    from app.server_process import ServerProcess
    from app.signals import close_on_signals
    from server.settings.config import HearthSettings
    from server.settings.kcpps import save_kcpps

    application = QApplication(sys.argv[:1])
    settings = HearthSettings(port_param=port, contextsize=1024)
    base_url = f"http://127.0.0.1:{port}"

    def watch(server: ServerProcess) -> None:
        server.lines_received.connect(lambda lines: [say(f"server| {line}") for line in lines])
        server.exited.connect(lambda code, reason: say(f"server-exited {code} {reason}"))
        server.failed.connect(lambda message: say(f"server-failed {message}"))

    if mode == "window":
        window = MainWindow(settings)
        watch(window.server)
        window.server_ready.connect(lambda: say(f"server-pid {window.server.process_id()}"))
        window.show()
        with close_on_signals(window):
            if not window.launch():
                say(f"launch-refused {window.notice.text()}")
                return 1
            code = int(application.exec())
        say("launcher-closed")
        return code

    server = ServerProcess()
    watch(server)
    program, arguments = server_command(save_kcpps(settings, folder / "child.kcpps"))
    poll = QTimer()
    poll.setInterval(100)

    def check_ready() -> None:
        try:
            answered = httpx.get(f"{base_url}/api/extra/version", timeout=0.5).status_code == 200
        except httpx.TransportError:
            return
        if answered:
            poll.stop()
            say(f"server-pid {server.process_id()}")

    poll.timeout.connect(check_ready)
    server.exited.connect(lambda *_: application.exit(1))  # only a kill should end this run
    server.start(program, arguments)
    poll.start()
    return int(application.exec())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))
