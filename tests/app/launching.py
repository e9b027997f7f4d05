"""Launching from the window without starting a process: what the server would be given."""

from __future__ import annotations

import pytest

from app.main_window import MainWindow
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings


def launched_settings(window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> HearthSettings:
    """Press Launch with the server process and the poller stubbed out, and parse the command
    the window would run as the server parses it."""
    started: list[list[str]] = []
    monkeypatch.setattr(
        window.server, "start", lambda _program, arguments: started.append(arguments)
    )
    monkeypatch.setattr(window.poller, "start", lambda _url: None)
    monkeypatch.setattr(window.live, "start", lambda _url, _token: None)
    assert window.launch()
    arguments = started[0]
    return parse_command_line(arguments[arguments.index("--skiplauncher") :]).settings
