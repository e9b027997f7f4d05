"""KoboldCpp-style command line: `hearth [model.gguf|settings.kcpps] [port] [--flags]`.

Flags given on the command line win over a `--config` file; everything else comes from the
file, then from the settings model's defaults.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.settings.config import HearthSettings
from server.settings.flags import flags_of
from server.settings.kcpps import load_kcpps

_SETTINGS_SUFFIXES = (".kcpps", ".kcppt")


def build_parser() -> argparse.ArgumentParser:
    # SUPPRESS as the default means the namespace holds only what the user typed, which is
    # exactly the set of values that must override a config file.
    parser = argparse.ArgumentParser(
        prog="hearth",
        description="Serve a local GGUF language model to every chat client: KoboldAI, OpenAI, "
        "Anthropic and Ollama APIs.",
        epilog="`hearth list-devices [--json]` lists the GPUs and the CPU llama.cpp can use, "
        "with the numbers --usevulkan takes. `hearth rpc-worker --help`: lend this machine's "
        "devices to another Hearth (llama.cpp's RPC).",
        argument_default=argparse.SUPPRESS,
    )
    # Positionals get an explicit None: argparse would otherwise run `type` on SUPPRESS.
    parser.add_argument(
        "model_or_config",
        nargs="?",
        default=None,
        metavar="MODEL_OR_KCPPS",
        help="GGUF model or .kcpps file",
    )
    parser.add_argument(
        "port_positional", nargs="?", type=int, default=None, metavar="PORT", help="port"
    )
    parser.add_argument("--config", metavar="FILE.kcpps", help="load settings from a .kcpps file")
    for name in _help_order():
        spec = flags_of(HearthSettings.model_fields[name])
        if spec is not None:  # each setting's flags are declared on its field
            _add_setting(parser, name, spec)
    return parser


def _help_order() -> list[str]:
    """The settings in the order --help lists them: HearthSettings' own first (the model, the
    address, the machine), then each group of fields in the order the class names them."""
    groups = [HearthSettings, *HearthSettings.__bases__]
    names = [name for group in groups for name in vars(group).get("__annotations__", {})]
    return list(dict.fromkeys(name for name in names if name in HearthSettings.model_fields))


def _add_setting(parser: argparse.ArgumentParser, name: str, spec: dict[str, Any]) -> None:
    """One setting's flags, as its field declares them (server/settings/flags.py)."""
    field = HearthSettings.model_fields[name]
    description = (field.description or "").rstrip(".")
    spellings = spec["flags"]
    if field.annotation is bool:
        parser.add_argument(*spellings, dest=name, action="store_true", help=description)
        if "off" in spec:  # a setting on by default needs a way to turn it off
            off, off_help = spec["off"]
            parser.add_argument(off, dest=name, action="store_false", help=off_help)
        return
    if "nargs" in spec:  # several words: KoboldCpp's `--tensor_split 3 1`, `--ssl CERT KEY`
        words: dict[str, Any] = {"nargs": spec["nargs"], "metavar": spec.get("metavar")}
        if spec.get("int_items"):
            words["type"] = int
        if spec.get("extend"):  # llama-server repeats the flag; KoboldCpp lists the words
            words["action"] = "extend"
        parser.add_argument(*spellings, dest=name, help=description, **words)
        return
    if field.annotation is not int:  # text: a path, a host, a password
        parser.add_argument(*spellings, dest=name, metavar=spec.get("metavar"), help=description)
        return
    _add_number(parser, name, spec, description)


def _add_number(
    parser: argparse.ArgumentParser, name: str, spec: dict[str, Any], description: str
) -> None:
    field = HearthSettings.model_fields[name]
    lower, upper = HearthSettings.bounds(name)
    extra: dict[str, Any] = {}
    if spec.get("bare") == "default":  # KoboldCpp: a bare --multiuser means the default
        extra = {"nargs": "?", "const": field.default}
    if spec.get("bare") == "most":  # KoboldCpp: a bare --moecpu means every layer
        extra = {"nargs": "?", "const": upper}
    parser.add_argument(
        *spec["flags"],
        dest=name,
        type=int,
        metavar=spec.get("metavar", "N"),
        help=f"{description} (default {field.default}; {lower} to {upper})",
        **extra,
    )


@dataclass(frozen=True, slots=True)
class CommandLine:
    settings: HearthSettings
    model_or_config_given: bool  # KoboldCpp opens the launcher when neither was given


def parse_command_line(argv: Sequence[str] | None = None) -> CommandLine:
    """Parse the command line, load `--config` if given, and apply the explicit flags on top.

    Raises `SettingsFileError` for an unusable config file and `pydantic.ValidationError` for
    a flag value out of range.
    """
    given: dict[str, Any] = vars(build_parser().parse_args(argv))
    config_path = given.pop("config", None)
    positional = given.pop("model_or_config", None)
    if positional is not None:
        if positional.lower().endswith(_SETTINGS_SUFFIXES) and config_path is None:
            config_path = positional
        else:
            given.setdefault("model_param", positional)
    port_positional = given.pop("port_positional", None)
    if port_positional is not None:
        given.setdefault("port_param", port_positional)

    base = load_kcpps(Path(config_path)) if config_path else HearthSettings()
    merged = {**base.model_dump(), **given}
    # As in KoboldCpp, Jinja for Tools turns on Use Jinja, when it was asked for (typed or in
    # the file): Hearth's own default being on says nothing about --jinja.
    asked = "jinja_tools" in given or "jinja_tools" in base.model_fields_set
    if merged.get("jinja_tools") and asked:
        merged["jinja"] = True
    given_anything = config_path is not None or "model_param" in given or "hf" in given
    return CommandLine(HearthSettings.model_validate(merged), given_anything)
