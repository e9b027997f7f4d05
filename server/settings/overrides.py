"""The text of KoboldCpp's `--overridekv` and `--overridetensors` (llama-server's
`--override-kv` and `--override-tensor`) read into what llama.cpp takes, each bad item refused
by name. model_fields.py checks and normalizes the settings with these.
"""

from __future__ import annotations

import re
from typing import Literal

OverrideType = Literal["int", "float", "bool", "str"]
_MAX_KEY_BYTES = 127  # llama_model_kv_override: char key[128], char val_str[128]


def parse_kv_overrides(text: str) -> list[tuple[str, OverrideType, str]]:
    """KEY=TYPE:VALUE[,...] as (key, type, value text); ValueError naming the bad item."""
    overrides: list[tuple[str, OverrideType, str]] = []
    for item in _items(text):
        key, equals, typed = item.partition("=")
        kind, colon, value = typed.partition(":")
        key, kind = key.strip(), kind.strip().lower()
        if not equals or not colon or not key:
            raise ValueError(f"{item!r}: write KEY=TYPE:VALUE (TYPE int, float, bool or str)")
        if len(key.encode()) > _MAX_KEY_BYTES:
            raise ValueError(f"{item!r}: a key has at most {_MAX_KEY_BYTES} bytes")
        overrides.append((key, _override_type(item, kind, value), value))
    return overrides


def _override_type(item: str, kind: str, value: str) -> OverrideType:
    if kind == "int":
        if not re.fullmatch(r"[+-]?\d+", value.strip()):
            raise ValueError(f"{item!r}: {value!r} is not an integer")
        return "int"
    if kind == "float":
        try:
            float(value)
        except ValueError:
            raise ValueError(f"{item!r}: {value!r} is not a number") from None
        return "float"
    if kind == "bool":
        if value.strip() not in ("true", "false"):
            raise ValueError(f"{item!r}: a bool is true or false")
        return "bool"
    if kind == "str":
        if len(value.encode()) > _MAX_KEY_BYTES:
            raise ValueError(f"{item!r}: a str value has at most {_MAX_KEY_BYTES} bytes")
        return "str"
    raise ValueError(f"{item!r}: the type is int, float, bool or str, not {kind!r}")


def parse_tensor_overrides(text: str) -> list[tuple[str, str]]:
    """PATTERN=BUFFER_TYPE[,...] as (regex, buffer type name); ValueError naming a bad item
    (no '=', an empty side, a regex that does not compile)."""
    overrides = []
    for item in _items(text):
        pattern, equals, buffer_type = item.rpartition("=")
        if not equals or not pattern or not buffer_type.strip():
            raise ValueError(f"{item!r}: write PATTERN=BUFFER_TYPE (e.g. exps=CPU)")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{item!r}: the pattern is not a valid regex ({exc})") from None
        overrides.append((pattern, buffer_type.strip()))
    return overrides


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
