"""Prints the first decode's top logits as JSON: `python -m tests.gpu.first_logits FLAGS…`.

FLAGS are Hearth's own (`--usevulkan 0 --gpulayers 99`, `--usecpu`), so the model is placed
exactly as the server would place it; each backend runs in its own process because ggml's
device registry is fixed once built.
"""

from __future__ import annotations

import json
import sys

import llama_cpp as llama

from server.core.llama.loading.model import LoadedModel
from server.models.files import resolve_model_path
from server.process.load_settings import load_settings
from server.settings.cli import parse_command_line

PROMPT = "1, 2, 3, 4, 5, 6, 7,"  # the next number: a clear first choice (margin ~5.8 on the CPU)
TOP = 10


def main() -> None:
    settings = parse_command_line(["--skiplauncher", "--contextsize", "512", *sys.argv[1:]])
    loaded = LoadedModel.load(resolve_model_path(None), load_settings(settings.settings))
    try:
        tokens = loaded.tokenize(PROMPT, add_bos=loaded.add_bos, parse_special=True)
        token_array = (llama.llama_token * len(tokens))(*tokens)  # kept alive for the decode
        batch = llama.llama_batch_get_one(token_array, len(tokens))
        if llama.llama_decode(loaded.context, batch) != 0:
            raise SystemExit("decode failed")
        logits = llama.llama_get_logits_ith(loaded.context, -1)
        values = [float(logits[i]) for i in range(loaded.n_vocab)]
        top = sorted(range(loaded.n_vocab), key=values.__getitem__, reverse=True)[:TOP]
        sys.stdout.write(
            json.dumps(
                {
                    "placement": loaded.placement.describe(),
                    "gpu_layers": loaded.placement.gpu_layers,
                    "top": [[token, values[token]] for token in top],
                }
            )
            + "\n"
        )
    finally:
        loaded.close()


if __name__ == "__main__":
    main()
