"""One default per setting: what loading a model reads (the core's `LoadSettings`, which may
not import the settings model) defaults to exactly what `HearthSettings`' defaults become at
the edge (server/process/load_settings.py). The launcher and the command line take theirs from
`HearthSettings` itself (tests/app/test_settings_bindings.py, tests/server/settings)."""

from __future__ import annotations

import dataclasses
from typing import Any

from server.core.load_settings import LoadSettings
from server.process.load_settings import load_settings
from server.settings.config import HearthSettings


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
