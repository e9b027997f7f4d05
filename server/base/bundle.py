"""Where Hearth's read-only files are: the source checkout, or a packaged (PyInstaller) build.

The one place that knows about PyInstaller's `sys._MEIPASS`.
"""

from __future__ import annotations

import sys
from pathlib import Path


def packaged() -> bool:
    """True in a packaged build (the files were unpacked into `sys._MEIPASS`)."""
    return getattr(sys, "_MEIPASS", None) is not None


def root_dir() -> Path:
    """The folder holding `resources/` and `presets/` (and, packaged, `models/`)."""
    bundle = getattr(sys, "_MEIPASS", None)
    # server/base/bundle.py → the checkout's root, two folders above `server/`.
    return Path(bundle) if bundle else Path(__file__).resolve().parents[2]
