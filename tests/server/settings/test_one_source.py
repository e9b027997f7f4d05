"""One source per setting: its flags are declared on its field (server/settings/flags.py),
and what loading a model reads (the core's `LoadSettings`, which may not import the settings
model) defaults to exactly what `HearthSettings`' defaults become at the edge
(server/process/load_settings.py). The launcher and the command line take theirs from
`HearthSettings` itself (tests/app/test_settings_bindings.py, tests/server/settings)."""

from __future__ import annotations

import dataclasses
from typing import Any

from server.core.load_settings import LoadSettings
from server.process.load_settings import load_settings
from server.settings.cli import build_parser
from server.settings.config import HearthSettings
from server.settings.flags import flags_of


def disagreements(derived: Any, own: Any, prefix: str = "") -> list[str]:
    """Every field (nested dataclasses walked) where the two differ, as `path: a != b`."""
    found = []
    for field in dataclasses.fields(own):
        mine, theirs = getattr(derived, field.name), getattr(own, field.name)
        if dataclasses.is_dataclass(theirs):
            found += disagreements(mine, theirs, f"{prefix}{field.name}.")
        elif mine != theirs:
            found.append(f"{prefix}{field.name}: settings {mine!r} != core {theirs!r}")
    return found


def test_the_cores_load_defaults_are_the_settings_defaults() -> None:
    derived = load_settings(HearthSettings(), projector=None)
    assert disagreements(derived, LoadSettings()) == []


def test_a_disagreement_is_found_however_deep() -> None:
    """The walk itself: a changed nested default is reported by its path."""
    own = LoadSettings()
    changed = dataclasses.replace(
        own, options=dataclasses.replace(own.options, cache_type_k="q8_0")
    )
    assert disagreements(changed, own) == ["options.cache_type_k: settings 'q8_0' != core 'f16'"]


def test_every_setting_declares_its_flags_on_its_field() -> None:
    """The command line is built from the fields alone (server/settings/flags.py): a field
    without flags could not be set from it, and the parser takes each declared spelling."""
    parser = build_parser()
    taken = {flag for action in parser._actions for flag in action.option_strings}
    for name, field in HearthSettings.model_fields.items():
        spec = flags_of(field)
        assert spec is not None, f"{name} declares no flags"
        assert set(spec["flags"]) <= taken, name
