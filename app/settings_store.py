"""The launcher's files: `.kcpps` with KoboldCpp's launcher rules, and remembered preferences.

Preferences (last settings, recent files) live in a TOML file in the platform's config folder,
written with tomli-w. Nothing here imports Qt; widgets never touch files themselves.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from app.paths import config_dir
from server.base.atomic_file import write_text_atomically
from server.base.defaults import DEFAULT_MULTIUSER
from server.settings.config import HearthSettings
from server.settings.kcpps import SettingsFileError, load_kcpps, save_kcpps
from server.settings.key_fates import not_applied, not_applied_lines

PREFERENCES_FILE = "launcher.toml"
MAX_RECENT = 8
LAUNCHER_MIN_MULTIUSER = 2
NOTICE_KEYS = 8  # keys a notice names before "and N more" (the tooltip names them all)


def validate_form(
    current: HearthSettings, values: dict[str, Any]
) -> tuple[HearthSettings | None, dict[str, str]]:
    """The form's `values` over `current` as settings, or None and a message per settings key.

    A model file must exist and pass the server's own header check, so a file that is not a
    GGUF or is cut short never starts a doomed server. So must a model folder (the server
    refuses to start without it) and, in admin mode, an admin folder: a typo there would
    otherwise show only once a client asks to switch models."""
    problems: dict[str, str] = {}
    folders = ["modeldir", "admindir"] if values.get("admin", current.admin) else ["modeldir"]
    for key in folders:
        folder = values.get(key)
        if folder and not Path(folder).expanduser().is_dir():
            problems[key] = "No such folder."
    model = values.get("model_param")
    if model and not Path(model).is_file():
        problems["model_param"] = "No such file."
    elif model:
        # Imported here: it brings numpy along, which the launcher's start does not need.
        from server.models.files import ModelFileError, check_gguf_file

        try:
            check_gguf_file(Path(model))
        except ModelFileError as exc:
            problems["model_param"] = str(exc)
    try:
        settings = HearthSettings.model_validate({**current.model_dump(), **values})
    except ValidationError as exc:
        for error in exc.errors():
            problems.setdefault(str(error["loc"][0]), error["msg"])
        return None, problems
    return (None, problems) if problems else (settings, {})


def apply_launcher_rules(settings: HearthSettings) -> HearthSettings:
    """KoboldCpp's launcher shows `multiuser` below 2 as 10 and `parallelrequests` of 1 or
    less as 1; what it shows is what it saves next."""
    changes: dict[str, Any] = {}
    if settings.multiuser < LAUNCHER_MIN_MULTIUSER:
        changes["multiuser"] = DEFAULT_MULTIUSER
    if settings.parallelrequests <= 1:
        changes["parallelrequests"] = 1
    if not changes:
        return settings
    return HearthSettings.model_validate({**settings.model_dump(), **changes})


def load_for_launcher(path: Path) -> HearthSettings:
    """Read a `.kcpps` as the launcher shows it; raises SettingsFileError."""
    return apply_launcher_rules(load_kcpps(path))


def loaded_notice(name: str, settings: HearthSettings) -> tuple[str, str]:
    """What the launcher says after loading the settings file `name`, and its tooltip: the
    keys the file sets that Hearth does not apply, the reasons in the tooltip."""
    fates = not_applied(settings.model_dump())
    if not fates:
        return f"Loaded {name}.", ""
    keys = [fate.key for fate in fates]
    if len(keys) > NOTICE_KEYS:
        keys[NOTICE_KEYS - 1 :] = [f"and {len(keys) - NOTICE_KEYS + 1} more"]
    text = f"Loaded {name}. Not applied by Hearth: {', '.join(keys)} (hover here for why)."
    return text, "\n".join(not_applied_lines(fates, name))


@dataclass
class Preferences:
    """What the launcher remembers between runs."""

    last_settings: HearthSettings = field(default_factory=HearthSettings)
    recent_files: list[str] = field(default_factory=list)

    def remember_file(self, path: Path) -> None:
        name = str(path)
        self.recent_files = [name] + [f for f in self.recent_files if f != name]
        del self.recent_files[MAX_RECENT:]


def preferences_path() -> Path:
    return config_dir() / PREFERENCES_FILE


def load_preferences(path: Path | None = None) -> Preferences:
    """Remembered preferences, or defaults when there are none or they are unreadable."""
    path = path or preferences_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return Preferences()
    try:
        settings = apply_launcher_rules(HearthSettings.model_validate(data.get("settings", {})))
    except ValidationError:
        settings = HearthSettings()
    recent = [str(f) for f in data.get("recent_files", []) if isinstance(f, str)]
    return Preferences(settings, recent[:MAX_RECENT])


def save_preferences(preferences: Preferences, path: Path | None = None) -> None:
    """Write atomically (temporary file, fsync, rename)."""
    path = path or preferences_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Only Hearth's own keys: a KoboldCpp file's extras stay in that file, and TOML has no
    # null, so unset values are left out.
    known = preferences.last_settings.model_dump(include=set(HearthSettings.model_fields))
    settings = {k: v for k, v in known.items() if v is not None}
    text = tomli_w.dumps({"recent_files": preferences.recent_files, "settings": settings})
    write_text_atomically(path, text)


__all__ = [
    "Preferences",
    "SettingsFileError",
    "apply_launcher_rules",
    "load_for_launcher",
    "load_preferences",
    "loaded_notice",
    "save_kcpps",
    "save_preferences",
]
