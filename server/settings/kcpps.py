"""Reading and writing KoboldCpp `.kcpps` settings files.

Reading keeps keys Hearth does not know, so a real KoboldCpp file saved back loses nothing.
Writing is atomic (temporary file + rename): a crash mid-save never leaves half a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server.base.atomic_file import write_text_atomically
from server.settings.config import HearthSettings

_MAX_FILE_BYTES = 50 * 1024 * 1024  # KoboldCpp refuses larger files too

# Old KoboldCpp key names still found in files, and the key each became.
_RENAMED_KEYS = {"blasbatchsize": "batchsize"}


class SettingsFileError(Exception):
    """A settings file could not be used; the message names the file and the problem."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def read_kcpps_dict(path: Path) -> dict[str, Any]:
    """The raw JSON object of a `.kcpps` file, with renamed keys migrated."""
    try:
        size = path.stat().st_size
        if size > _MAX_FILE_BYTES:
            raise SettingsFileError(path, f"file is too large ({size} bytes)")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SettingsFileError(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(path, f"cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsFileError(
            path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise SettingsFileError(path, "expected a JSON object of settings")
    for old, new in _RENAMED_KEYS.items():
        if old in data and new not in data:
            data[new] = data.pop(old)
    return data


def settings_from_kcpps_dict(data: dict[str, Any], path: Path) -> HearthSettings:
    try:
        return HearthSettings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise SettingsFileError(path, problems) from None


def load_kcpps(path: Path) -> HearthSettings:
    """Read a `.kcpps` file into settings, or raise `SettingsFileError`."""
    return settings_from_kcpps_dict(read_kcpps_dict(path), path)


def save_kcpps(settings: HearthSettings, path: Path) -> Path:
    """Write settings as indented JSON, atomically; adds `.kcpps` when the name has no suffix
    of a KoboldCpp settings file. Returns the path written."""
    if path.suffix.lower() not in (".kcpps", ".kcppt"):
        path = path.with_name(path.name + ".kcpps")
    write_text_atomically(path, json.dumps(settings.to_kcpps(), indent=2) + "\n")
    return path
