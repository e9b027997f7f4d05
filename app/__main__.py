"""Opening the launcher: `python -m app`, or `hearth` with no model and no config."""

from __future__ import annotations

import os
import sys

from server.settings.config import HearthSettings

NO_DISPLAY_MESSAGE = (
    "hearth: no display found, so the launcher cannot open.\n"
    "To serve headless, run:  hearth --skiplauncher [model.gguf] [--port 5001]\n"
    "(from a source checkout: make serve)\n"
)
EXIT_NO_DISPLAY = 2


def display_available() -> bool:
    """Whether a window can be shown (an explicit QT_QPA_PLATFORM always counts)."""
    if os.environ.get("QT_QPA_PLATFORM"):
        return True
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def run_launcher(settings: HearthSettings | None = None) -> int:
    """Show the launcher (prefilled with `settings` if given) until it is closed."""
    if not display_available():
        sys.stderr.write(NO_DISPLAY_MESSAGE)
        return EXIT_NO_DISPLAY
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from app.main_window import MainWindow
    from app.paths import resource_root
    from app.settings_store import load_preferences
    from app.signals import close_on_signals

    application = QApplication.instance() or QApplication(sys.argv[:1])
    application.setApplicationName("Hearth")
    if isinstance(application, QApplication):
        application.setWindowIcon(
            QIcon(str(resource_root() / "resources" / "icons" / "hearth.png"))
        )
    window = MainWindow(settings, load_preferences())
    window.show()
    # SIGTERM (logout, task manager) and Ctrl-C close the window as its close button does.
    with close_on_signals(window):
        return int(application.exec())


def main() -> int:
    return run_launcher()


if __name__ == "__main__":
    sys.exit(main())
