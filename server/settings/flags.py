"""A setting's command line, declared on its field beside its KoboldCpp key (the field's name),
default, bounds and description: `Field(..., json_schema_extra=flags("--contextsize"))`.

server/settings/cli.py builds the parser from these alone, so a setting lives in one place:
its field. The `.kcpps` key is the field's name and its fate ("applied") follows from the field
existing (key_fates.py lists the KoboldCpp keys that have none); the launcher's row
(app/tabs/settings_table.py) takes its range, default and description from the same field.
"""

from __future__ import annotations

from typing import Any

from pydantic.fields import FieldInfo


def flags(
    *spellings: str,
    metavar: str | tuple[str, ...] | None = None,
    nargs: str | int | None = None,
    int_items: bool = False,
    extend: bool = False,
    bare: str | None = None,
    off: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The flags that set a field (KoboldCpp's first, then llama-server's and others').

    `metavar`: the value's name in --help (N for numbers, none for text unless given);
    `nargs`: how many words the flag takes (KoboldCpp's `--tensor_split 3 1`);
    `int_items`: those words are numbers; `extend`: a repeated flag adds to the list;
    `bare`: what the flag alone means, "default" or "most" (KoboldCpp's bare `--multiuser`
    and `--moecpu`); `off`: a flag and its help that turn off a setting on by default.
    """
    spec: dict[str, Any] = {"flags": spellings}
    options = {"metavar": metavar, "nargs": nargs, "bare": bare, "off": off}
    spec.update({key: value for key, value in options.items() if value is not None})
    if int_items:
        spec["int_items"] = True
    if extend:
        spec["extend"] = True
    return spec


def flags_of(field: FieldInfo) -> dict[str, Any] | None:
    """The `flags(...)` a field declares (None: it has no flag)."""
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "flags" in extra:
        return extra
    return None
