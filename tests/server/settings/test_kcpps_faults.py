"""Fault suite: a `.kcpps` save that fails half-way leaves the user's previous file intact.

Failures are injected where a real one happens: the rename (`os.replace`: permissions, a
read-only or cross-device folder), the flush to disk (`os.fsync`: disk full, I/O error), and
the write itself (disk full after part of the text went out).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from server.base import atomic_file
from server.settings.config import HearthSettings
from server.settings.kcpps import load_kcpps, save_kcpps
from tests.support.save_faults import FAULTS

FILE_NAME = "mine.kcpps"


def leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name != FILE_NAME)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_failed_save_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    path = save_kcpps(HearthSettings(port_param=5005, contextsize=2048), tmp_path / FILE_NAME)
    previous = path.read_bytes()
    FAULTS[fault](monkeypatch)
    with pytest.raises(OSError) as raised:
        save_kcpps(HearthSettings(port_param=6006, contextsize=8192), path)
    assert raised.value.errno in (errno.EACCES, errno.ENOSPC)
    monkeypatch.undo()
    assert path.read_bytes() == previous
    assert load_kcpps(path).port_param == 5005
    assert leftovers(tmp_path) == []  # no temporary file left behind


@pytest.mark.parametrize("fault", FAULTS)
def test_a_failed_first_save_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    FAULTS[fault](monkeypatch)
    with pytest.raises(OSError):
        save_kcpps(HearthSettings(), tmp_path / FILE_NAME)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_an_interrupted_save_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or any exception) during the flush: the same guarantee, and it propagates."""
    path = save_kcpps(HearthSettings(port_param=5005), tmp_path / FILE_NAME)
    previous = path.read_bytes()

    def fsync(_fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic_file.os, "fsync", fsync)
    with pytest.raises(KeyboardInterrupt):
        save_kcpps(HearthSettings(port_param=6006), path)
    monkeypatch.undo()
    assert path.read_bytes() == previous
    assert leftovers(tmp_path) == []
