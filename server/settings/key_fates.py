"""What becomes of each key of a KoboldCpp `.kcpps` file in Hearth: applied, or not and why.

A key is applied when `HearthSettings` has a field of that name (KoboldCpp's argparse
destinations are its field names) or reads it as one (`READ_AS`). Every other KoboldCpp key
(1.116, with the older and deprecated ones still found in saved files) has a one-sentence
reason here, which the console and the launcher show when a loaded file sets it; a key
KoboldCpp does not know either is named as unknown. Every key is kept in the file and written
back unchanged, whatever its fate.

Pure data and small functions: the console (server/process) and the launcher (app/) both
read it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from server.settings.config import HearthSettings

# KoboldCpp's old keys that Hearth reads as the new one, when the file lacks that
# (server/settings/model_fields.py).
READ_AS = {"flashattention": "noflashattention"}

UNKNOWN = "unknown, kept in the file"
_WIDTH = 100  # a reason's keys wrap at this width on the console

_ONE_TIME = "a one-time command, not a setting"
_TEXT_ONLY = "Hearth serves text models only"
_NO_HORDE = "no AI Horde worker in Hearth"
_DEPRECATED = "deprecated in KoboldCpp itself"
_ONE_BUILD = "Hearth runs the one llama.cpp build it was installed with"
_RPC_HOST = "to lend this machine's devices, run `hearth rpc-worker` instead"

# Why each KoboldCpp key Hearth has no field for is not applied (one short sentence each).
NOT_APPLIED: dict[str, str] = {
    # -- the command line's one-time commands --
    "config": _ONE_TIME,
    "exportconfig": _ONE_TIME,
    "exporttemplate": _ONE_TIME,
    "unpack": _ONE_TIME,
    "version": _ONE_TIME,
    "analyze": _ONE_TIME,
    "benchmark": _ONE_TIME,
    "prompt": _ONE_TIME,
    "cli": _ONE_TIME,
    "testmemory": _ONE_TIME,
    "istemplate": "Hearth loads a launch template like any settings file",
    # -- the model, the port, the machine --
    "model": "Hearth reads the model from model_param: move the path or URL there",
    "port": "Hearth listens on port_param: move the port there",
    "autofit": "Hearth always fits: gpulayers -1 offloads as many layers as fit",
    "autofitpadding": "the fit uses Hearth's own memory estimate and margin",
    "blasthreads": "Hearth reads prompts with --threads threads too",
    "maingpu": "Hearth splits by layers across the devices --usevulkan or --usecuda choose",
    "splitmode": "Hearth always splits a model between devices by layers",
    "device": "choose devices with --usevulkan or --usecuda; hearth list-devices lists them",
    "nommq": "Hearth leaves CUDA's matrix kernels to llama.cpp",
    "nopipelineparallel": "Hearth keeps llama.cpp's default for several GPUs",
    "noavx2": _ONE_BUILD,
    "failsafe": _ONE_BUILD,
    "highpriority": "Hearth runs at normal priority: raise it with nice or your system",
    "foreground": "Hearth never brings its console window to the front",
    "debugmode": "Hearth's console has no debug levels",
    "noswa": "Hearth always keeps the full-size SWA cache, as noswa does",
    "swapadding": "Hearth keeps the full-size SWA cache, so there is nothing to pad",
    "smartcontext": "outdated in KoboldCpp: Hearth has ContextShift and the prompt cache",
    "overridenativecontext": "set the RoPE scaling with ropeconfig instead",
    "usemtp": "speculation in Hearth drafts with a draft model or n-grams, not MTP layers",
    "ignoremissing": "Hearth refuses to start on a missing file and names it",
    "downloaddir": "downloads go to the Hugging Face cache, HF_HUB_CACHE",
    "nomodel": "the launcher opens without a model anyway; a server always serves one",
    "chatcompletionsadapter": "Hearth uses the model's own chat template, or --jinjatemplate",
    "enableguidance": "no classifier-free guidance or negative prompts in Hearth",
    "visionmaxres": "llama.cpp's projector scales each image to its model's own size",
    # -- the network --
    "remotetunnel": "no Cloudflare tunnel: use deploy/ nginx or your own",
    "nocertify": "Hearth never turns certificate checks off",
    "singleinstance": "Hearth never stops another server: it says the port is in use",
    "mcpfile": "no MCP client in Hearth: clients run their own tools",
    "onready": "Hearth runs no command when ready: the console and /health say so",
    "allow_config_onready": "belongs to onready, which Hearth does not run",
    "checkforupdates": "Hearth never checks for updates",
    # -- the admin mode's KoboldCpp-only parts --
    "adminunloadtimeout": "models unload after their keep_alive instead",
    "routermode": "Hearth switches models in place, with no router proxy",
    "autoswapmode": _TEXT_ONLY,
    "reqtimeout": "only KoboldCpp's router proxy uses it, and Hearth has none",
    "baseconfig": "Hearth's admin reloads take whole .kcpps files from admindir",
    # -- RPC: Hearth has llama-server's --rpc and its own rpc-worker command --
    "rpcmode": "to connect, set rpc to the workers; to host, run `hearth rpc-worker`",
    "rpctargets": "Hearth takes RPC workers from rpc, as HOST:PORT,HOST:PORT",
    "rpchost": _RPC_HOST,
    "rpcport": _RPC_HOST,
    "rpcdevice": _RPC_HOST,
    # -- the embeddings model --
    "embeddingsmaxctx": "Hearth sizes the embeddings context to its longest input",
    "embeddingsgpu": "the embeddings model runs on the CPU in Hearth",
    # -- AI Horde --
    "hordemodelname": _NO_HORDE,
    "hordeworkername": _NO_HORDE,
    "hordekey": _NO_HORDE,
    "hordemaxctx": _NO_HORDE,
    "hordegenlen": _NO_HORDE,
    # -- images, speech, sound and music --
    **dict.fromkeys(
        (
            "sdmodel",
            "sdthreads",
            "sdclamped",
            "sdclampedsoft",
            "sdt5xxl",
            "sdclip1",
            "sdclip2",
            "sdclipdevice",
            "sdphotomaker",
            "sdupscaler",
            "sdflashattention",
            "sdoffloadcpu",
            "sdconvdirect",
            "sdvae",
            "sdvaeauto",
            "sdvaedevice",
            "sdaudiovae",
            "sdquant",
            "sdlora",
            "sdloramult",
            "sdtiledvae",
            "sdmaingpu",
            "sdvramlimit",
            "whispermodel",
            "ttsmodel",
            "ttswavtokenizer",
            "ttsgpu",
            "ttsmaxlen",
            "ttsthreads",
            "ttsdir",
            "musicllm",
            "musicembeddings",
            "musicdiffusion",
            "musicvae",
            "musiclowvram",
        ),
        _TEXT_ONLY,
    ),
    # -- old and deprecated keys still found in saved files --
    "usecublas": "KoboldCpp's old name for usecuda: rename the key",
    "useclblast": "no CLBlast backend in Hearth: use Vulkan",
    "blasbatchsize": "KoboldCpp's old name for batchsize: the file's batchsize wins",
    "nommap": "deprecated in KoboldCpp: usemmap replaced it",
    "useswa": "deprecated in KoboldCpp: noswa replaced it",
    "hordeconfig": _DEPRECATED,
    "sdconfig": _DEPRECATED,
    "noblas": _DEPRECATED,
    "pipelineparallel": _DEPRECATED,
    "sdnotile": _DEPRECATED,
    "sdvaecpu": _DEPRECATED,
    "sdclipgpu": _DEPRECATED,
    "forceversion": _DEPRECATED,
    "sdgendefaults": _DEPRECATED,
}

# KoboldCpp's defaults that are not empty (None, "", [], {}, false, 0), for the keys above: a
# file that saves a key at its default sets nothing. Some changed between versions.
_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "port": (5001,),
    "port_param": (5001,),
    "draftamount": (8,),
    "draftgpulayers": (999, -1),
    "chatcompletionsadapter": ("AutoGuess",),
    "autofitpadding": (1024,),
    "maingpu": (-1,),
    "splitmode": ("layer",),
    "visionmaxres": (1024,),
    "visionmintokens": (-1,),
    "visionmaxtokens": (-1,),
    "reqtimeout": (600,),
    "rpcmode": ("disabled",),
    "rpchost": ("0.0.0.0",),
    "rpcport": (5551,),
    "embeddingsmaxctx": (4096,),
    "sdconvdirect": ("off",),
    "sdloramult": ([1.0],),
    "sdtiledvae": (640, 768),
    "sdmaingpu": (-1,),
    "sdclipdevice": (None,),  # a device number: 0 is the first GPU, not "unset"
    "sdvaedevice": (None,),
    "ttsmaxlen": (4096,),
}
_EMPTY: tuple[Any, ...] = (None, "", [], {})

# Keys KoboldCpp saves beside the key Hearth reads (or renamed to it), and that key: when the
# file sets the latter, the former adds nothing (KoboldCpp, too, reads the latter first).
_SAVED_BESIDE = {
    "model": "model_param",
    "port": "port_param",
    "blasbatchsize": "batchsize",
    "usecublas": "usecuda",
}


@dataclass(frozen=True, slots=True)
class KeyFate:
    """A key a settings file sets that Hearth does not apply, and why."""

    key: str
    reason: str


# Settings Hearth has (read, kept, shown) but does not act on yet: named like the others
# (none at present; the draft model's keys were, until speculation from a draft model came).
NOT_YET_APPLIED: dict[str, str] = {}


def is_applied(key: str) -> bool:
    if key in NOT_YET_APPLIED:
        return False
    return key in HearthSettings.model_fields or key in READ_AS


def reason_not_applied(key: str) -> str | None:
    """Why Hearth does not apply `key` (None: it does); UNKNOWN for a key KoboldCpp does not
    know either."""
    if is_applied(key):
        return None
    return NOT_YET_APPLIED.get(key) or NOT_APPLIED.get(key, UNKNOWN)


def sets_something(key: str, value: Any) -> bool:
    """False when `value` is KoboldCpp's default or empty for `key`, which changes nothing."""
    if any(value == empty and type(value) is type(empty) for empty in _EMPTY):
        return False
    if key in _DEFAULTS:
        return not any(value == default for default in _DEFAULTS[key])
    return bool(value != 0)  # false, 0 and 0.0 set nothing


def not_applied(data: Mapping[str, Any]) -> list[KeyFate]:
    """The keys of a settings file (the raw object `kcpps.read_kcpps_dict` returns, or loaded
    settings' `model_dump()`, which keeps the file's other keys) that set something Hearth does
    not apply, in the file's order.
    A key KoboldCpp does not know either is always named: it may be a misspelt setting."""
    fates = []
    for key, value in data.items():
        reason = reason_not_applied(key)
        if reason is None or _superseded(key, data):
            continue
        if reason == UNKNOWN or sets_something(key, value):
            fates.append(KeyFate(key, reason))
    return fates


def _superseded(key: str, data: Mapping[str, Any]) -> bool:
    read = _SAVED_BESIDE.get(key)
    return read is not None and sets_something(read, data.get(read))


def describe(fates: list[KeyFate]) -> list[str]:
    """The keys grouped by their reason, one "key, key (reason)" item per reason, each key
    named once, in the order the keys first appear."""
    groups: dict[str, list[str]] = {}
    for fate in fates:
        groups.setdefault(fate.reason, []).append(fate.key)
    return [f"{', '.join(keys)} ({reason})" for reason, keys in groups.items()]


def not_applied_lines(fates: list[KeyFate], source: str | None = None) -> list[str]:
    """The console's lines: one when there are few reasons, else a heading and a line per
    reason; none when the file sets nothing Hearth leaves out."""
    if not fates:
        return []
    heading = f"Not applied by Hearth (from {source})" if source else "Not applied by Hearth"
    items = describe(fates)
    if len(items) <= 2:
        return [f"{heading}: {'; '.join(items)}."]
    lines = [f"{heading}:"]
    for item in items:
        lines += textwrap.wrap(item, _WIDTH, initial_indent="  ", subsequent_indent="    ")
    return lines
