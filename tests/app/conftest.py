"""Fixtures of the launcher tests: a private preferences folder for each test, a window."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from server.settings.config import HearthSettings
from tests.support.servers import free_port


@pytest.fixture(autouse=True)
def private_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test remembers its preferences in its own folder, never the user's."""
    folder = tmp_path / "config"
    monkeypatch.setenv("HEARTH_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture
def window(qtbot: QtBot) -> MainWindow:
    """A launcher window with default settings but a free port (so a launch cannot meet a
    server already on 5001)."""
    main = MainWindow(HearthSettings(port_param=free_port()))
    qtbot.addWidget(main)
    return main
