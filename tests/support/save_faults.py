"""Faults injected into an atomic save: a failed rename, a full disk at fsync or mid-write."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

import pytest

from server.base import atomic_file


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
