"""Writing a file so that a crash, a full disk or Ctrl-C mid-write never leaves half of it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to a temporary file beside `path`, flush it to disk, then rename
    it over `path`: readers see the old file or the new one, never a mix. On failure the old
    file is untouched, no temporary file is left behind, and the error propagates."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            # On disk before the rename, or a power cut could leave an empty file in its place.
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
