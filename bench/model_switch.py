"""What switching models costs, against not switching, measured in the same run.

Two names for the bundled model in a --modeldir (a hard link: the same weights, so only the
switch differs). With `--maxloadedmodels 1`, alternating requests reload a model each time;
with 2, both stay loaded. Prints the median time of a short completion in each case and the
ratios to the no-switch case. Not a timed test: `make bench`-style, run by hand:
`.venv/bin/python -m bench.model_switch`.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.servers import hearth_command, start_server, stop_server
from server.models.files import resolve_model_path

ROUNDS = 8
NAMES = ("first", "second")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def timed_completion(base_url: str, model: str) -> float:
    started = time.perf_counter()
    answer = httpx.post(
        f"{base_url}/v1/completions",
        json={"model": model, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0},
        timeout=300,
    )
    answer.raise_for_status()
    return time.perf_counter() - started


def medians(folder: Path, max_loaded: int) -> tuple[float, float]:
    """(median of requests on the model already current, median of alternating requests)."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = hearth_command(
        port, "--model", str(folder / "first.gguf"), "--modeldir", str(folder),
        "--maxloadedmodels", str(max_loaded),
    )  # fmt: skip
    process = start_server(command, base_url, "/api/v1/model")
    try:
        timed_completion(base_url, "first")  # warm-up
        same = [timed_completion(base_url, "first") for _ in range(ROUNDS)]
        alternating = [timed_completion(base_url, NAMES[i % 2]) for i in range(1, ROUNDS + 1)]
    finally:
        stop_server(process)
    return statistics.median(same), statistics.median(alternating)


def main() -> None:
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        for name in NAMES:
            try:
                os.link(resolve_model_path(None), folder / f"{name}.gguf")
            except OSError:
                shutil.copyfile(resolve_model_path(None), folder / f"{name}.gguf")
        same_1, switching_1 = medians(folder, 1)
        same_2, switching_2 = medians(folder, 2)
    print(f"{ROUNDS} short completions each (8 tokens), median seconds:")
    print(f"  --maxloadedmodels 1, same model:        {same_1:.3f}")
    print(f"  --maxloadedmodels 1, alternating models: {switching_1:.3f}"
          f"  ({switching_1 / same_1:.1f}x: a reload each time)")  # fmt: skip
    print(f"  --maxloadedmodels 2, same model:        {same_2:.3f}")
    print(f"  --maxloadedmodels 2, alternating models: {switching_2:.3f}"
          f"  ({switching_2 / same_2:.1f}x: both stay loaded)")  # fmt: skip


if __name__ == "__main__":
    main()
