#!/usr/bin/env python3
"""A stand-in `llama-server` binary for the test files of llama.cpp's suite that start a server
of their own per test (`make compat`'s "spawned" files, e.g. unit/test_template.py).

The suite's `ServerProcess.start()` runs `$LLAMA_SERVER_BIN_PATH` with llama-server's flags,
built from each test's own settings (chat template file, `--reasoning`, `--n-predict`...). This
script is that binary. It rewrites the command line for the server under test and replaces
itself (exec) with it, so the suite's terminate/kill reach the server directly:

- llama-server (`HEARTH_SHIM_TARGET=llama-server`): the same flags, except that the model the
  test names on Hugging Face (no network here) becomes the local model file.
- Hearth (`HEARTH_SHIM_TARGET=hearth`): each flag Hearth has is spelled Hearth's way; flags for
  things Hearth has no setting for are left out and listed on stderr (the server log), so a case
  that depended on one fails visibly rather than mysteriously.
- Both: a test that names a vision model (ServerPreset.tinygemma3, whose repository holds a
  projector that llama-server's `-hf` fetches) gets `--mmproj` with the projector the runner
  wrote for the local model (`HEARTH_SHIM_PROJECTOR`: a tiny Gemma 3 projector with random
  weights), so its image cases run on both servers alike.

Standard library only: it runs under whichever Python the suite's virtualenv has.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# llama-server flag -> Hearth flag, for flags that take a value.
HEARTH_VALUE_FLAGS = {
    "--host": "--host",
    "--port": "--port",
    "--seed": "--seed",
    "--threads": "--threads",
    "--ctx-size": "--contextsize",
    "--parallel": "--parallelrequests",
    "--n-predict": "--defaultgenamt",
    "--batch-size": "--batchsize",
    "--api-key": "--api-key",  # the same flag (server/dialects/edge/api_keys.py)
    "--chat-template": "--chat-template",
    "--chat-template-file": "--chat-template-file",
    "--chat-template-kwargs": "--chat-template-kwargs",
    "--reasoning-format": "--reasoning-format",
    "--reasoning-budget": "--reasoning-budget",
    "--reasoning": "--reasoning",
    "--slot-save-path": "--slot-save-path",
    "--cache-ram": "--cache-ram",
    "-fa": "--flash-attn",
    "-ctk": "--cache-type-k",
    "-ctv": "--cache-type-v",
    "--spec-type": "--spec-type",
    "--cors-origins": "--cors-origins",  # the same flag (server/dialects/edge/cors.py)
    "--sleep-idle-seconds": "--sleep-idle-seconds",  # the same flag (model_lifecycle.py)
    "--alias": "--alias",  # the same flags (server/dialects/pipeline/model_choice.py)
    "--tags": "--tags",
    "--media-path": "--media-path",  # the same flag (server/dialects/media/local_media.py)
    # the same flags (server/server_tools, served at /tools)
    "--tools": "--tools",
    "--tools-runtime": "--tools-runtime",
    "--mcp-servers-json": "--mcp-servers-json",
    "--mcp-servers-config": "--mcp-servers-config",
    "--pooling": "--pooling",  # the same flag (server/core/llama/embedding/embedder.py)
}
# llama-server switch -> Hearth switch.
HEARTH_SWITCHES = {
    "--jinja": "--jinja",
    "--metrics": "--metrics",
    "--verbose": "--verbose",
    "--rerank": "--rerank",  # /v1/rerank (server/dialects/llama/rerank.py)
    "--reranking": "--reranking",
    "--no-slots": "--no-slots",  # /slots off: llama-server's 501
}
# llama-server's `--n-predict -1` (until the context is full) as Hearth's largest default length.
HEARTH_UNLIMITED_PREDICT = "16384"
# Switches that are Hearth's behaviour anyway (no flag needed) or have no meaning for it.
SILENT_SWITCHES = {"--offline", "--no-jinja", "--slots", "--no-ui", "--no-webui", "--cont-batching"}
# llama-server flags that take a value; the ones Hearth lacks are left out with their value.
VALUE_FLAGS = {
    *HEARTH_VALUE_FLAGS,
    "--model",
    "--model-url",
    "--hf-repo",
    "--hf-file",
    "--model-draft",
    "--models-dir",
    "--models-max",
    "--models-preset",
    "--cors-origins",
    "--ubatch-size",
    "--n-gpu-layers",
    "--pooling",
    "--alias",
    "--tags",
    "-ctk",
    "-ctv",
    "-fa",
    "--grp-attn-n",
    "--grp-attn-w",
    "--lora",
    "--spec-type",
    "--spec-draft-n-max",
    "--spec-draft-n-min",
    "--spec-synth-len",
    "--spec-synth-rates",
    "--temp",
    "--mmproj-url",
    "--media-path",
    "--sleep-idle-seconds",
    "--tools",
    "--tools-runtime",
    "--mcp-servers-config",
    "--mcp-servers-json",
    "--draft-max",
    "--draft-min",
}
# Flags whose value is a path: made absolute before the server is started elsewhere.
PATH_FLAGS = {
    "--chat-template-file",
    "--slot-save-path",
    "--model",
    "--lora",
    "--media-path",
    "--mcp-servers-config",
}
MODEL_FLAGS = {"--model", "--model-url", "--hf-repo", "--hf-file"}
# Hugging Face repositories of the suite's presets that come with a projector.
VISION_REPOS = ("tinygemma3",)


def projector_flags(pairs: Sequence[tuple[str, str | None]]) -> list[str]:
    """`--mmproj FILE` when the test's model is a vision model and the runner wrote one."""
    projector = os.environ.get("HEARTH_SHIM_PROJECTOR")
    repos = [value or "" for flag, value in pairs if flag == "--hf-repo"]
    if projector and any(name in repo for repo in repos for name in VISION_REPOS):
        return ["--mmproj", projector]
    return []


def split_flags(argv: Sequence[str]) -> list[tuple[str, str | None]]:
    """llama-server's command line as (flag, value or None) pairs."""
    pairs: list[tuple[str, str | None]] = []
    index = 0
    while index < len(argv):
        flag = argv[index]
        takes_value = flag in VALUE_FLAGS or (
            flag not in HEARTH_SWITCHES
            and flag not in SILENT_SWITCHES
            and index + 1 < len(argv)
            and not argv[index + 1].startswith("-")
        )
        value = argv[index + 1] if takes_value and index + 1 < len(argv) else None
        if value is not None and flag in PATH_FLAGS:
            value = str(Path(value).resolve())
        pairs.append((flag, value))
        index += 2 if takes_value else 1
    return pairs


def hearth_command(pairs: Sequence[tuple[str, str | None]], python: str, model: str) -> list[str]:
    command = [python, "-m", "server", "--skiplauncher", "--model", model]
    left_out = []
    for flag, value in pairs:
        if flag in MODEL_FLAGS:
            continue
        if flag == "--n-predict" and value is not None and int(value) < 0:
            command += ["--defaultgenamt", HEARTH_UNLIMITED_PREDICT]
        elif flag == "--temp" and value is not None:
            # Hearth has no server-wide temperature flag; KoboldCpp's default parameters say it.
            command += ["--gendefaults", json.dumps({"temperature": float(value)})]
        elif value is not None and flag in HEARTH_VALUE_FLAGS:
            command += [HEARTH_VALUE_FLAGS[flag], value]
        elif value is None and flag in HEARTH_SWITCHES:
            command.append(HEARTH_SWITCHES[flag])
        elif flag not in SILENT_SWITCHES:
            left_out.append(flag if value is None else f"{flag} {value}")
    if left_out:
        sys.stderr.write("[hearth shim] not passed to Hearth: " + ", ".join(left_out) + "\n")
    return command


def llama_server_command(
    pairs: Sequence[tuple[str, str | None]], binary: str, model: str
) -> list[str]:
    command = [binary, "--model", model]
    for flag, value in pairs:
        if flag not in MODEL_FLAGS:
            command += [flag] if value is None else [flag, value]
    return command


def main(argv: Sequence[str]) -> None:
    pairs = split_flags(argv)
    target = os.environ["HEARTH_SHIM_TARGET"]
    model = os.environ["HEARTH_SHIM_MODEL"]
    if target == "hearth":
        command = hearth_command(pairs, os.environ["HEARTH_SHIM_PYTHON"], model)
    else:
        command = llama_server_command(pairs, os.environ["HEARTH_SHIM_BINARY"], model)
    extra = os.environ.get("HEARTH_SHIM_EXTRA", "")
    command += extra.split() + projector_flags(pairs)
    sys.stderr.write("[hearth shim] " + " ".join(command) + "\n")
    sys.stderr.flush()
    # Hearth imports its `server` package from the checkout under test.
    os.chdir(os.environ.get("HEARTH_SHIM_CWD", "."))
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
