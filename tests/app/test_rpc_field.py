"""The Network tab's RPC Workers field: bound to the `rpc` setting (llama-server's --rpc), kept
in .kcpps files, and handed to the launched server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from tests.app.launching import launched_settings

WORKERS = "10.0.0.5:50052,10.0.0.6:50052"


def test_the_field_sets_the_launched_servers_workers(
    window: MainWindow, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    field = window.network.rpc
    assert field.text() == "" and "rpc-worker" in field.toolTip()
    assert "trust" in field.toolTip()
    qtbot.keyClicks(field, f" {WORKERS} ")
    settings = window.read_settings()
    assert settings is not None and settings.rpc == WORKERS

    served = launched_settings(window, monkeypatch)
    assert served.rpc == WORKERS

    field.clear()
    cleared = window.read_settings()
    assert cleared is not None and cleared.rpc is None


def test_the_field_round_trips_through_a_kcpps(window: MainWindow, tmp_path: Path) -> None:
    loaded = tmp_path / "rpc.kcpps"
    loaded.write_text(json.dumps({"rpc": WORKERS, "someoneelseskey": 1}))
    assert window.load_file(loaded)
    assert window.network.rpc.text() == WORKERS
    saved = window.save_file(tmp_path / "saved.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    assert data["rpc"] == WORKERS and data["someoneelseskey"] == 1
