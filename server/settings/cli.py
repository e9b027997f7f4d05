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
from server.settings.kcpps import load_kcpps

_SETTINGS_SUFFIXES = (".kcpps", ".kcppt")


# KoboldCpp's flag for each setting; the settings' names are its argparse destinations.
# Everything else about a flag (type, default, range, help) comes from HearthSettings.
_FLAGS: dict[str, tuple[str, ...]] = {
    "model_param": ("--model",),
    "hf": ("--hf", "-hf"),
    "modeldir": ("--modeldir",),
    "defaultmodel": ("--defaultmodel",),
    "maxloadedmodels": ("--maxloadedmodels",),
    "alias": ("--alias", "-a"),  # llama-server's flags
    "tags": ("--tags",),
    "sleep_idle_seconds": ("--sleep-idle-seconds",),  # llama-server's flag
    "admin": ("--admin",),
    "admindir": ("--admindir",),
    "adminpassword": ("--adminpassword",),
    "embeddingsmodel": ("--embeddingsmodel",),
    "rerank": ("--rerank", "--reranking"),  # llama-server's flags
    "pooling": ("--pooling",),
    "spm_infill": ("--spm-infill",),  # llama-server's flag
    "host": ("--host",),
    "port_param": ("--port",),
    "threads": ("--threads",),
    "contextsize": ("--contextsize",),
    "gpulayers": ("--gpulayers",),
    "usevulkan": ("--usevulkan",),
    "usecuda": ("--usecuda",),
    "usecpu": ("--usecpu",),
    "rpc": ("--rpc",),  # llama-server's flag
    "tensor_split": ("--tensor_split", "--tensorsplit"),
    "multiuser": ("--multiuser",),
    "parallelrequests": ("--parallelrequests",),
    "batchsize": ("--batchsize",),
    "password": ("--password",),
    "maxrequestsize": ("--maxrequestsize",),
    "defaultgenamt": ("--defaultgenamt",),
    "quiet": ("--quiet",),
    "seed": ("--seed",),  # llama-server's flag (KoboldCpp has none)
    "metrics": ("--metrics",),  # llama-server's flag (KoboldCpp has none)
    "no_slots": ("--no-slots",),  # llama-server's flag
    "verbose": ("--verbose", "-v"),  # llama-server's flag
    "resumegrace": ("--resumegrace",),  # Hearth's own
    "nofastforward": ("--nofastforward",),
    "cacheram": ("--cacheram", "--cache-ram", "-cram"),  # llama-server's spellings too
    "smartcache": ("--smartcache",),
    "privatecache": ("--privatecache",),
    "cachedir": ("--cachedir",),
    "cachedisk": ("--cachedisk",),
    "slot_save_path": ("--slot-save-path",),  # llama-server's flag
    "noshift": ("--noshift",),
    "jinja": ("--jinja",),
    "jinja_tools": ("--jinjatools", "--jinja_tools"),
    "jinjatemplate": ("--jinjatemplate", "--chat-template-file"),  # and llama-server's
    "chat_template": ("--chat-template",),  # llama-server's flag
    "jinja_kwargs": ("--jinja_kwargs", "--chat-template-kwargs"),  # and llama-server's
    "jinjathink": ("--jinjathink", "--reasoning", "-rea"),  # llama-server's on|off|auto too
    "reasoningeffort": ("--reasoningeffort", "--reasoning-effort"),  # and llama-server's
    "reasoning_format": ("--reasoning-format",),  # llama-server's flag
    "reasoning_budget": ("--reasoning-budget",),  # llama-server's flag
    # -- model-loading options (server/settings/model_fields.py) --
    "quantkv": ("--quantkv",),
    "cache_type_k": ("--cache-type-k", "-ctk"),  # llama-server's flags
    "cache_type_v": ("--cache-type-v", "-ctv"),
    "noflashattention": ("--noflashattention",),
    "flash_attn": ("--flash-attn", "-fa"),  # llama-server's on|off|auto
    "usemmap": ("--usemmap", "--mmap"),  # and older llama-server's
    "usemlock": ("--usemlock", "--mlock"),
    "load_mode": ("--load-mode", "-lm"),  # llama-server's flag
    "lowvram": ("--lowvram", "--no-kv-offload", "-nkvo"),  # and llama-server's
    "ropeconfig": ("--ropeconfig",),
    "rope_freq_base": ("--rope-freq-base",),  # llama-server's flags
    "rope_scale": ("--rope-scale",),
    "overridekv": ("--overridekv", "--override-kv"),  # and llama-server's
    "overridetensors": ("--overridetensors", "--override-tensor", "-ot"),
    "moecpu": ("--moecpu", "--n-cpu-moe", "-ncmoe"),
    "moeexperts": ("--moeexperts",),
    "nobostoken": ("--nobostoken",),
    "genlimit": ("--genlimit",),
    "gendefaults": ("--gendefaults",),
    "gendefaultsoverwrite": ("--gendefaultsoverwrite",),
    # -- speculative decoding (server/settings/speculation_fields.py) --
    "spec_type": ("--spec-type",),  # llama-server's flags
    "spec_ngram_simple_size_n": ("--spec-ngram-simple-size-n",),
    "spec_ngram_simple_size_m": ("--spec-ngram-simple-size-m",),
    "spec_ngram_mod_n_match": ("--spec-ngram-mod-n-match",),
    "spec_ngram_mod_n_min": ("--spec-ngram-mod-n-min",),
    "spec_ngram_mod_n_max": ("--spec-ngram-mod-n-max",),
    # the multimodal projector (KoboldCpp's keys, llama-server's spellings)
    "mmproj": ("--mmproj", "-mm"),
    "no_mmproj": ("--no-mmproj", "--no-mmproj-auto"),  # llama-server's flags
    "mmprojcpu": ("--mmprojcpu", "--no-mmproj-offload"),
    "visionmintokens": ("--visionmintokens", "--image-min-tokens"),
    "visionmaxtokens": ("--visionmaxtokens", "--image-max-tokens"),
    "remoteimages": ("--remoteimages",),  # Hearth's own
    "media_path": ("--media-path",),  # llama-server's
    # KoboldCpp's draft model keys, with llama-server's spellings beside them
    "draftmodel": ("--draftmodel", "--spec-draft-model", "--model-draft", "-md"),
    "draftamount": ("--draftamount", "--spec-draft-n-max", "--draft-max"),
    "spec_draft_n_min": ("--spec-draft-n-min", "--draft-min"),  # llama-server's flags
    "spec_draft_p_min": ("--spec-draft-p-min", "--draft-p-min"),
    "draftgpulayers": ("--draftgpulayers", "--spec-draft-ngl", "--gpu-layers-draft", "-ngld"),
    "draftgpusplit": ("--draftgpusplit",),
    # -- LoRA adapters (server/settings/lora_fields.py) --
    "lora": ("--lora",),
    "loramult": ("--loramult",),
    "lora_scaled": ("--lora-scaled",),  # llama-server's flags
    "lora_init_without_apply": ("--lora-init-without-apply",),
    # -- TLS, keys, limits (server/settings/network_fields.py) --
    "ssl": ("--ssl",),
    "ssl_cert_file": ("--ssl-cert-file",),  # llama-server's flags
    "ssl_key_file": ("--ssl-key-file",),
    "api_key": ("--api-key",),
    "api_key_file": ("--api-key-file",),
    "ratelimit": ("--ratelimit",),
    "keyratelimit": ("--keyratelimit",),  # Hearth's own
    "trustedproxies": ("--trustedproxies",),
    "cors_origins": ("--cors-origins",),  # llama-server's flag
    "multiuserperkey": ("--multiuserperkey",),  # Hearth's own
    # -- server-side tools (server/settings/tool_fields.py): llama-server's flags --
    "server_tools": ("--tools",),
    "tools_runtime": ("--tools-runtime",),
    "mcp_servers_json": ("--mcp-servers-json",),
    "mcp_servers_config": ("--mcp-servers-config",),
    # -- KoboldAI Lite's server features (server/settings/lite_fields.py) --
    "multiplayer": ("--multiplayer",),
    "websearch": ("--websearch",),
    "savedatafile": ("--savedatafile",),
    "preloadstory": ("--preloadstory",),
    "launch": ("--launch",),
    "skiplauncher": ("--skiplauncher",),
    "showgui": ("--showgui",),
}
_METAVARS = {
    "model_param": "PATH|URL",
    "hf": "OWNER/REPO[:QUANT]",
    "modeldir": "DIR",
    "defaultmodel": "NAME",
    "alias": "NAME[,NAME]",
    "tags": "TAG[,TAG]",
    "maxrequestsize": "MB",
    "password": "PASSWORD",
    "admindir": "DIR",
    "adminpassword": "PASSWORD",
    "embeddingsmodel": "FILE",
    "rpc": "HOST:PORT[,HOST:PORT]",
    "resumegrace": "SECONDS",
    "sleep_idle_seconds": "SECONDS",
    "cacheram": "MiB",
    "smartcache": "N",
    "cachedir": "DIR",
    "cachedisk": "MiB",
    "slot_save_path": "DIR",
    "jinjatemplate": "FILE",
    "chat_template": "NAME|JINJA",
    "jinja_kwargs": "JSON",
    "jinjathink": "default|true|false",
    "reasoningeffort": "LEVEL",
    "reasoning_format": "none|deepseek|auto",
    "reasoning_budget": "N",
    # -- model-loading options --
    "quantkv": "f16|bf16|q8_0|q5_1|q4_0",
    "cache_type_k": "TYPE",
    "cache_type_v": "TYPE",
    "flash_attn": "on|off|auto",
    "load_mode": "auto|none|mmap|mlock|mmap+mlock|dio",
    "ropeconfig": "SCALE,BASE",
    "rope_freq_base": "N",
    "rope_scale": "N",
    "overridekv": "KEY=TYPE:VALUE[,...]",
    "overridetensors": "PATTERN=TYPE[,...]",
    "gendefaults": "JSON",
    # -- speculative decoding --
    "spec_type": "none|ngram-simple|ngram-mod",
    "draftmodel": "FILE",
    "mmproj": "FILE",
    "spec_draft_p_min": "P",
    # -- LoRA adapters --
    "loramult": "SCALE",
    # -- TLS, keys, limits --
    "ssl_cert_file": "FILE",
    "ssl_key_file": "FILE",
    "api_key": "KEY[,KEY]",
    "api_key_file": "FILE",
    "ratelimit": "SECONDS",
    "keyratelimit": "SECONDS",
    "cors_origins": "ORIGIN[,ORIGIN]|localhost|*",
    # -- server-side tools --
    "server_tools": "all|TOOL[,TOOL]",
    "tools_runtime": "KIND:TARGET",
    "mcp_servers_json": "JSON",
    "mcp_servers_config": "FILE",
    # -- KoboldAI Lite's server features --
    "savedatafile": "FILE",
    "preloadstory": "FILE",
}


# Hearth's own off switches for settings whose default is on (KoboldCpp has only the "on" flag).
_OFF_FLAGS: dict[str, tuple[str, str]] = {
    "jinja_tools": (
        "--nojinjatools",
        "Tool calls the KoboldCpp way for every model (the tools in the system text, the reply "
        "bound to a JSON schema), even one with a tool-call format of its own",
    ),
}


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
    for name, flags in _FLAGS.items():
        _add_setting(parser, name, flags)
    return parser


def _add_setting(parser: argparse.ArgumentParser, name: str, flags: tuple[str, ...]) -> None:
    field = HearthSettings.model_fields[name]
    description = (field.description or "").rstrip(".")
    if field.annotation is bool:
        parser.add_argument(*flags, dest=name, action="store_true", help=description)
        if name in _OFF_FLAGS:  # a setting on by default needs a way to turn it off
            off, off_help = _OFF_FLAGS[name]
            parser.add_argument(off, dest=name, action="store_false", help=off_help)
        return
    if name == "usevulkan":  # KoboldCpp: `--usevulkan` alone means every device
        parser.add_argument(
            *flags, dest=name, nargs="*", type=int, metavar="ID", help=f"{description}"
        )
        return
    if name in ("tensor_split", "draftgpusplit"):  # KoboldCpp: `3 1`; llama-server: `3,1`
        parser.add_argument(*flags, dest=name, nargs="+", metavar="SHARE", help=description)
        return
    if name in ("lora", "lora_scaled"):  # KoboldCpp: `--lora A B`; llama-server repeats it
        metavar = "FILE" if name == "lora" else "FILE:SCALE"
        parser.add_argument(
            *flags, dest=name, action="extend", nargs="+", metavar=metavar, help=description
        )
        return
    if name == "ssl":  # KoboldCpp: `--ssl CERT KEY`
        parser.add_argument(*flags, dest=name, nargs=2, metavar=("CERT", "KEY"), help=description)
        return
    if name == "trustedproxies":  # `--trustedproxies 10.0.0.1 172.16.0.0/12`, or with commas
        parser.add_argument(*flags, dest=name, nargs="+", metavar="ADDR", help=description)
        return
    if name == "remoteimages":  # `--remoteimages a.com *.b.org`, or `a.com,*.b.org`
        parser.add_argument(*flags, dest=name, nargs="+", metavar="HOST", help=description)
        return
    if name == "ropeconfig":  # KoboldCpp: `--ropeconfig 0.5 10000`; also `0.5,10000`
        parser.add_argument(*flags, dest=name, nargs="+", metavar="SCALE", help=description)
        return
    if name == "usecuda":  # KoboldCpp: `--usecuda [normal|lowvram] [ID] [mmq|nommq] …`
        parser.add_argument(*flags, dest=name, nargs="*", metavar="WORD", help=description)
        return
    if field.annotation is not int:  # text: a path, a host, a password
        parser.add_argument(*flags, dest=name, metavar=_METAVARS.get(name), help=description)
        return
    lower, upper = HearthSettings.bounds(name)
    extra: dict[str, Any] = {}
    if name == "multiuser":  # KoboldCpp: a bare --multiuser means the default
        extra = {"nargs": "?", "const": field.default}
    if name == "moecpu":  # KoboldCpp: a bare --moecpu means every layer
        extra = {"nargs": "?", "const": upper}
    parser.add_argument(
        *flags,
        dest=name,
        type=int,
        metavar=_METAVARS.get(name, "N"),
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
