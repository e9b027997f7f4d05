"""Fault suite, launcher side: a save that fails half-way is reported and the old file stays."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app import settings_store
from app.main_window import NOTICE_STYLES, MainWindow
from server.base import atomic_file
from server.settings.config import HearthSettings
from server.settings.kcpps import load_kcpps, save_kcpps
from tests.support.save_faults import FAULTS


@pytest.mark.parametrize("fault", FAULTS)
def test_a_failed_save_is_reported_and_the_old_file_stays(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    folder = tmp_path / "saved"
    folder.mkdir()
    path = save_kcpps(HearthSettings(port_param=5005), folder / "mine.kcpps")
    previous = path.read_bytes()
    window = MainWindow(HearthSettings())
    qtbot.addWidget(window)
    window.network.port.setValue(6006)
    FAULTS[fault](monkeypatch)
    assert window.save_file(path) is None
    monkeypatch.undo()
    notice = window.notice.text()
    assert notice.startswith(f"Could not save {path}"), notice
    assert not window.notice.isHidden() and window.notice.styleSheet() == NOTICE_STYLES["error"]
    assert path.read_bytes() == previous
    assert load_kcpps(path).port_param == 5005
    assert os.listdir(folder) == ["mine.kcpps"]
    assert str(path.resolve()) not in window.preferences.recent_files  # nothing was saved


def test_failed_preferences_keep_the_old_ones_and_closing_still_works(
    qtbot: QtBot, private_config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings_store.save_preferences(
        settings_store.Preferences(HearthSettings(port_param=5005), ["/a.kcpps"])
    )
    path = settings_store.preferences_path()
    previous = path.read_bytes()
    window = MainWindow(HearthSettings(port_param=6006))
    qtbot.addWidget(window)

    def replace(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_file.os, "replace", replace)
    with pytest.raises(OSError):
        settings_store.save_preferences(window.preferences)
    assert window.close()  # closing saves preferences too, and must not fail
    monkeypatch.undo()
    assert path.read_bytes() == previous
    assert os.listdir(private_config_dir) == [path.name]


def test_preferences_reach_the_disk_before_they_replace_the_old_ones(
    private_config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an fsync before the rename, a power cut can leave an empty file in place of
    the old one (the rename reaches the disk before the data)."""
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def replace(source: str, target: object) -> None:
        calls.append("replace")
        real_replace(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic_file.os, "fsync", fsync)
    monkeypatch.setattr(atomic_file.os, "replace", replace)
    settings_store.save_preferences(settings_store.Preferences(HearthSettings(port_param=5005)))
    assert calls == ["fsync", "replace"]
    assert settings_store.load_preferences().last_settings.port_param == 5005
