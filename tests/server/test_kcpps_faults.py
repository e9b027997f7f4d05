"""Fault suite: a `.kcpps` save that fails half-way leaves the user's previous file intact.

Failures are injected where a real one happens: the rename (`os.replace`: permissions, a
read-only or cross-device folder), the flush to disk (`os.fsync`: disk full, I/O error), and
the write itself (disk full after part of the text went out).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from server.base import atomic_file
from server.settings.config import HearthSettings
from server.settings.kcpps import load_kcpps, save_kcpps

FILE_NAME = "mine.kcpps"


class HalfWrittenFile:
    """A text file whose write gets half the text out, then fails as a full disk does."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def __enter__(self) -> HalfWrittenFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._handle.close()

    def write(self, text: str) -> int:
        self._handle.write(text[: len(text) // 2])
        self._handle.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def fail_replace(monkeypatch: pytest.MonkeyPatch) -> None:
    def replace(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(atomic_file.os, "replace", replace)


def fail_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    def fsync(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_file.os, "fsync", fsync)


def fail_write(monkeypatch: pytest.MonkeyPatch) -> None:
    real_fdopen = os.fdopen

    def fdopen(fd: int, *args: Any, **kwargs: Any) -> HalfWrittenFile:
        return HalfWrittenFile(real_fdopen(fd, *args, **kwargs))

    monkeypatch.setattr(atomic_file.os, "fdopen", fdopen)


FAULTS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "rename fails": fail_replace,
    "disk full at fsync": fail_fsync,
    "disk full mid-write": fail_write,
}


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
