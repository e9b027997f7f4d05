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

from server.config import HearthSettings
from server.kcpps import load_kcpps

_SETTINGS_SUFFIXES = (".kcpps", ".kcppt")


def build_parser() -> argparse.ArgumentParser:
    # SUPPRESS as the default means the namespace holds only what the user typed, which is
    # exactly the set of values that must override a config file.
    parser = argparse.ArgumentParser(
        prog="hearth",
        description="Serve a local GGUF language model over the KoboldAI API.",
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
    parser.add_argument("--model", dest="model_param", metavar="PATH", help="GGUF model file")
    parser.add_argument("--config", metavar="FILE.kcpps", help="load settings from a .kcpps file")
    parser.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", dest="port_param", type=int, help="port (default 5001)")
    parser.add_argument("--threads", type=int, help="CPU threads (default: all cores, max 8)")
    parser.add_argument("--contextsize", type=int, help="context size in tokens (default 12288)")
    parser.add_argument("--gpulayers", type=int, help="layers to offload to a GPU")
    parser.add_argument(
        "--multiuser",
        type=int,
        nargs="?",
        const=10,
        help="requests in flight counting the running one; 0 = no queue (default 10)",
    )
    parser.add_argument(
        "--parallelrequests", type=int, help="requests generated together (default 1 = off)"
    )
    parser.add_argument("--batchsize", type=int, help="prompt tokens per decode (default 512)")
    parser.add_argument("--password", help="require 'Authorization: Bearer PASSWORD'")
    parser.add_argument(
        "--maxrequestsize",
        type=int,
        metavar="MB",
        help="refuse request bodies larger than this many MB with 413 (default 32)",
    )
    parser.add_argument("--defaultgenamt", type=int, help="default tokens to generate (1536)")
    parser.add_argument(
        "--quiet", action="store_true", help="hide prompts and outputs in the console"
    )
    parser.add_argument(
        "--nofastforward", action="store_true", help="never reuse a cached prompt prefix"
    )
    parser.add_argument(
        "--noshift", action="store_true", help="no ContextShift: recompute a trimmed chat"
    )
    parser.add_argument(
        "--jinja",
        action="store_true",
        help="KoboldCpp compatibility: the model's own chat template is always used if it has one",
    )
    parser.add_argument(
        "--jinjatools",
        "--jinja_tools",
        dest="jinja_tools",
        action="store_true",
        help="tool calls in the model's own format, streamed live when recognized",
    )
    parser.add_argument("--skiplauncher", action="store_true", help="never open the launcher")
    parser.add_argument("--showgui", action="store_true", help="open the launcher prefilled")
    return parser


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
    if merged.get("jinja_tools"):
        merged["jinja"] = True  # as in KoboldCpp, Jinja for Tools turns on Use Jinja
    given_anything = config_path is not None or "model_param" in given
    return CommandLine(HearthSettings.model_validate(merged), given_anything)
