"""Decode speed of Hearth's engine against peers measured in the same run, on the bundled model.

    .venv/bin/python bench/engine_speed.py [--tokens 200] [--repeats 5]

Prints medians (tokens/s) and ratios for:
- raw:    llama_decode of one token + llama.cpp's sampler chain in a bare loop (the ceiling);
- hearth: LlamaCppEngine.generate, in process (adds the text pipeline and event objects);
- high:   llama-cpp-python's high-level Llama.create_completion(stream=True), the usual route;
- http:   Hearth's /api/extra/generate/stream read by a client, one SSE event per token.
Each repetition starts its prompt with a fresh line so no prefix cache can help.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

from bench.servers import hearth_command, start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import llama_cpp as llama  # noqa: E402

from server.core.llama import LlamaCppEngine  # noqa: E402
from server.core.types import GenerationRequest, SamplingParams  # noqa: E402
from server.models.files import bundled_model_path  # noqa: E402
from server.process.load_settings import load_settings  # noqa: E402
from server.settings.config import HearthSettings  # noqa: E402

PROMPT = "Once upon a time, in a small village by the sea, there lived"
THREADS = 2
CONTEXT = 4096


def fresh_prompt(index: int) -> str:
    return f"Story {index} of the collection.\n{PROMPT}"


def bench_raw(engine: LlamaCppEngine, tokens: int, index: int) -> float:
    """The bare low-level loop with the same sampler chain Hearth builds."""
    prompt = engine.tokenize(fresh_prompt(index))
    slot = engine._slots.slots[0]
    engine._slots.forget(slot)
    context, batch = engine._loaded.context, engine._batch.batch
    for i, token in enumerate(prompt):
        batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, i, 1
        batch.seq_id[i][0], batch.logits[i] = 0, i == len(prompt) - 1
    batch.n_tokens = len(prompt)
    llama.llama_decode(context, batch)
    sampler = engine._samplers.build(SamplingParams(seed=index, ban_eos=True), prompt, None)
    started = time.perf_counter()
    for position in range(len(prompt), len(prompt) + tokens):
        token = llama.llama_sampler_sample(sampler, context, -1)
        batch.token[0], batch.pos[0], batch.n_seq_id[0] = token, position, 1
        batch.seq_id[0][0], batch.logits[0], batch.n_tokens = 0, 1, 1
        llama.llama_decode(context, batch)
    elapsed = time.perf_counter() - started
    llama.llama_sampler_free(sampler)
    engine._slots.forget(slot)  # the loop bypassed the engine's bookkeeping
    return tokens / elapsed


def bench_hearth(engine: LlamaCppEngine, tokens: int, index: int) -> float:
    request = GenerationRequest(
        "bench", fresh_prompt(index), tokens, SamplingParams(seed=index, ban_eos=True)
    )
    events = list(engine.generate(request, threading.Event()))
    outcome = events[-1]
    return outcome.completion_tokens / outcome.generation_seconds  # type: ignore[union-attr]


def bench_high_level(model_path: Path, tokens: int, repeats: int) -> list[float]:
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    high = llama.Llama(
        str(model_path), n_ctx=CONTEXT, n_threads=THREADS, n_threads_batch=THREADS, verbose=False
    )
    rates = []
    try:
        for index in range(repeats):
            stream = high.create_completion(
                fresh_prompt(1000 + index),
                max_tokens=tokens,
                stream=True,
                temperature=0.7,
                top_k=100,
                top_p=0.9,
                seed=index,
            )  # no logit_bias: it would add a Python logits processor and slow this peer
            count, first = 0, None
            for _ in stream:
                count += 1
                if first is None:
                    first = time.perf_counter()
            assert first is not None
            rates.append((count - 1) / (time.perf_counter() - first))
    finally:
        high.close()
    return rates


def bench_http(tokens: int, repeats: int) -> list[float]:
    port = 5099
    base = f"http://127.0.0.1:{port}"
    server = start_server(hearth_command(port), base, "/api/extra/version")
    try:
        rates = []
        for index in range(repeats):
            body = {
                "prompt": fresh_prompt(2000 + index),
                "max_length": tokens,
                "ban_eos_token": True,
                "sampler_seed": index,
            }
            arrivals = []
            with httpx.stream(
                "POST", f"{base}/api/extra/generate/stream", json=body, timeout=120
            ) as response:
                for line in response.iter_lines():
                    if line.startswith("data: ") and '"finish_reason": null' in line:
                        arrivals.append(time.perf_counter())
            rates.append((len(arrivals) - 1) / (arrivals[-1] - arrivals[0]))
        return rates
    finally:
        stop_server(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    model_path = bundled_model_path()
    settings = HearthSettings(threads=THREADS, contextsize=CONTEXT)
    engine = LlamaCppEngine.load(model_path, load_settings(settings))
    results: dict[str, list[float]] = {}
    try:
        bench_hearth(engine, 16, 999)  # warm-up
        # Interleave raw and hearth so drift on a busy machine hits both alike.
        raw_rates, hearth_rates = [], []
        for index in range(args.repeats):
            raw_rates.append(bench_raw(engine, args.tokens, index))
            hearth_rates.append(bench_hearth(engine, args.tokens, 100 + index))
        results["raw low-level loop"] = raw_rates
        results["hearth engine"] = hearth_rates
    finally:
        engine.close()
    results["llama-cpp-python high-level"] = bench_high_level(model_path, args.tokens, args.repeats)
    results["hearth over HTTP (SSE)"] = bench_http(args.tokens, args.repeats)

    medians = {label: statistics.median(rates) for label, rates in results.items()}
    print(f"bundled model, {THREADS} threads, {args.tokens} tokens, median of {args.repeats}")
    for label, median in medians.items():
        print(f"  {label:32s} {median:7.1f} tokens/s")
    raw = medians["raw low-level loop"]
    print(f"  hearth engine / raw loop          {medians['hearth engine'] / raw:.3f}")
    print(
        f"  hearth engine / high-level        "
        f"{medians['hearth engine'] / medians['llama-cpp-python high-level']:.3f}"
    )
    print(
        f"  hearth HTTP / hearth engine       "
        f"{medians['hearth over HTTP (SSE)'] / medians['hearth engine']:.3f}"
    )
    per_token_ms = 1000 / medians["hearth engine"] - 1000 / raw
    print(f"  Python work per token (engine - raw): {per_token_ms:.3f} ms")


if __name__ == "__main__":
    main()
