"""The Network tab's Prometheus Metrics box: bound to the `metrics` setting, kept in .kcpps
files, and what Launch hands the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from tests.app.launching import launched_settings


def test_the_box_turns_metrics_on_for_the_launched_server(
    window: MainWindow, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = window.network.metrics
    assert box.text() == "Prometheus Metrics" and not box.isChecked()
    assert "/metrics" in box.toolTip()
    with qtbot.waitSignal(box.toggled) as toggled:
        box.click()
    assert toggled.args == [True]
    settings = window.read_settings()
    assert settings is not None and settings.metrics

    served = launched_settings(window, monkeypatch)
    assert served.metrics

    with qtbot.waitSignal(box.toggled):
        box.click()
    assert window.read_settings() == settings.model_copy(update={"metrics": False})


def test_the_box_round_trips_through_a_kcpps(window: MainWindow, tmp_path: Path) -> None:
    loaded = tmp_path / "metrics.kcpps"
    loaded.write_text(json.dumps({"metrics": True, "someoneelseskey": 1}))
    assert window.load_file(loaded)
    assert window.network.metrics.isChecked()
    saved = window.save_file(tmp_path / "saved.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    assert data["metrics"] is True and data["someoneelseskey"] == 1
    window.network.metrics.setChecked(False)
    saved = window.save_file(tmp_path / "off.kcpps")
    assert saved is not None and json.loads(saved.read_text())["metrics"] is False
