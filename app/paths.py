"""Where the launcher finds things: its config folder, the presets, the server command.

A packaged (frozen) build re-runs its own binary for the server; from source it is
`python -m server`. Either way the server gets `--skiplauncher` and a `.kcpps` file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from server.base.bundle import root_dir

APP_NAME = "Hearth"


def config_dir() -> Path:
    """The platform's per-user config folder for Hearth (HEARTH_CONFIG_DIR overrides it)."""
    override = os.environ.get("HEARTH_CONFIG_DIR")
    if override:
        return Path(override)
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", Path.home())) / APP_NAME
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP_NAME
    return Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "hearth"


def resource_root() -> Path:
    """The project (or unpacked bundle) folder holding `presets/` and `resources/`."""
    return root_dir()


def presets_dir() -> Path:
    return resource_root() / "presets"


def server_command(settings_file: Path) -> tuple[str, list[str]]:
    """Program and arguments that serve the settings in `settings_file` headless."""
    return hearth_command(["--skiplauncher", "--config", str(settings_file)])


def hearth_command(arguments: list[str]) -> tuple[str, list[str]]:
    """Program and arguments that run `hearth ARGUMENTS` (the packaged binary re-runs itself)."""
    if getattr(sys, "frozen", False):
        return sys.executable, arguments
    return sys.executable, ["-m", "server", *arguments]
