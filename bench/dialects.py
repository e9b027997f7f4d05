"""Streaming speed of each dialect against the KoboldAI stream, measured in the same run.

    .venv/bin/python -m bench.dialects [--tokens 150] [--repeats 3] [--baseline DIR]

Starts `python -m server` on the bundled model and streams the same prompt through every
dialect with a raw HTTP client, so only the server's framing differs. Prints, per dialect, the
median time to the first text and text events per second, and their ratio to KoboldAI SSE.

With `--baseline DIR` (another checkout, e.g. `git worktree add /tmp/before HEAD~1`), a second
server runs from there and every stream is measured on both, alternately, so a change's effect
on each dialect is read as a ratio from the same run rather than across two runs.

With `--scripted`, the servers run a scripted engine that produces tokens as fast as it can
(bench/scripted_server.py): no model time, so what is measured is the HTTP path alone, framing,
batching of bursts and the client's parsing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.servers import hearth_command, start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
PORT = 5098
BASE = f"http://127.0.0.1:{PORT}"
BASELINE_PORT = 5099
BASELINE = f"http://127.0.0.1:{BASELINE_PORT}"
PROMPT = "Once upon a time, in a small village by the sea, there lived"

Extractor = Callable[[str], bool]  # does this line carry text?


def _sse_data(line: str) -> dict[str, object] | None:
    if not line.startswith("data: ") or line == "data: [DONE]":
        return None
    payload = json.loads(line[6:])
    return payload if isinstance(payload, dict) else None


def kobold(line: str) -> bool:
    data = _sse_data(line)
    return bool(data and data.get("token"))


def openai_completions(line: str) -> bool:
    data = _sse_data(line)
    choices = data.get("choices") if data else None
    return bool(isinstance(choices, list) and choices and choices[0].get("text"))


def anthropic(line: str) -> bool:
    data = _sse_data(line)
    return bool(data and data.get("type") == "content_block_delta")


def ollama(line: str) -> bool:
    data = json.loads(line) if line.startswith("{") else {}
    return bool(data.get("response"))


def openai_chat(line: str) -> bool:
    data = _sse_data(line)
    choices = data.get("choices") if data else None
    return bool(isinstance(choices, list) and choices and choices[0]["delta"].get("content"))


def openai_responses(line: str) -> bool:
    data = _sse_data(line)
    return bool(data and data.get("type") == "response.output_text.delta")


def ollama_chat(line: str) -> bool:
    data = json.loads(line) if line.startswith("{") else {}
    return bool(data.get("message", {}).get("content"))


CASES: list[tuple[str, str, dict[str, object], Extractor]] = [
    ("KoboldAI SSE", "/api/extra/generate/stream", {"max_length": 0}, kobold),
    (
        "OpenAI completions",
        "/v1/completions",
        {"stream": True, "max_tokens": 0},
        openai_completions,
    ),
    ("Anthropic messages", "/v1/messages", {"stream": True, "max_tokens": 0}, anthropic),
    ("Ollama generate", "/api/generate", {"model": "m", "raw": True}, ollama),
    ("OpenAI chat", "/v1/chat/completions", {"stream": True, "max_tokens": 0}, openai_chat),
    (
        "OpenAI responses",
        "/v1/responses",
        {"stream": True, "max_output_tokens": 0},
        openai_responses,
    ),
    ("Ollama chat", "/api/chat", {"model": "m"}, ollama_chat),
]

CHAT_PATHS = ("/v1/messages", "/v1/chat/completions", "/api/chat")


def body_for(path: str, template: dict[str, object], tokens: int, index: int) -> dict[str, object]:
    prompt = f"Story {index}.\n{PROMPT}"  # a fresh first line: no prefix cache can help
    body = dict(template)
    if "max_length" in body:
        body.update(prompt=prompt, max_length=tokens, ban_eos_token=True)
    elif path in CHAT_PATHS:
        body.update(messages=[{"role": "user", "content": prompt}])
        if path == "/api/chat":
            body.update(options={"num_predict": tokens})
        else:
            body.update(max_tokens=tokens)
    elif path == "/v1/responses":
        body.update(input=prompt, max_output_tokens=tokens)
    elif path == "/api/generate":
        body.update(prompt=prompt, options={"num_predict": tokens})
    else:
        body.update(prompt=prompt, max_tokens=tokens)
    return body


def measure(
    path: str, body: dict[str, object], has_text: Extractor, base: str = BASE
) -> tuple[float, float]:
    started = time.perf_counter()
    arrivals: list[float] = []
    with httpx.stream("POST", base + path, json=body, timeout=120) as response:
        for line in response.iter_lines():
            if has_text(line):
                arrivals.append(time.perf_counter())
    first = arrivals[0] - started
    rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
    return first, rate


Samples = dict[str, list[tuple[float, float]]]


def run_cases(repeats: int, tokens: int, bases: list[str]) -> list[Samples]:
    """Every case `repeats` times on each server; interleaved, so drift hits all alike."""
    results: list[Samples] = [{name: [] for name, *_ in CASES} for _ in bases]
    for index in range(repeats):
        for name, path, template, has_text in CASES:
            body = body_for(path, template, tokens, index * 10 + len(results[0][name]))
            order = list(enumerate(bases))
            if index % 2:
                order.reverse()  # neither server always goes first
            for which, base in order:
                results[which][name].append(measure(path, body, has_text, base))
    return results


def medians(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(f for f, _ in samples), statistics.median(r for _, r in samples)


def print_table(results: Samples, tokens: int, repeats: int) -> None:
    base_first, base_rate = medians(results["KoboldAI SSE"])
    print(f"{tokens} tokens, median of {repeats}")
    print(f"  {'dialect':20s} {'first text':>11s} {'events/s':>9s} {'rate ratio':>11s}")
    for name, samples in results.items():
        first, rate = medians(samples)
        print(
            f"  {name:20s} {first * 1000:9.0f}ms {rate:9.1f} {rate / base_rate:11.3f}"
            f"   (first text {1000 * (first - base_first):+.0f} ms vs KoboldAI)"
        )


def print_comparison(now: Samples, before: Samples) -> None:
    print("this checkout against the baseline, same run (ratio > 1: this one is faster)")
    print(f"  {'dialect':20s} {'events/s':>9s} {'baseline':>9s} {'ratio':>7s} {'first text':>11s}")
    for name in now:
        first, rate = medians(now[name])
        old_first, old_rate = medians(before[name])
        print(
            f"  {name:20s} {rate:9.1f} {old_rate:9.1f} {rate / old_rate:7.3f}"
            f" {1000 * (first - old_first):+9.0f}ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare against")
    parser.add_argument("--scripted", action="store_true", help="no model: the HTTP path alone")
    args = parser.parse_args()

    def command(root: Path, port: int) -> list[str]:
        if args.scripted:
            return [sys.executable, str(root / "bench" / "scripted_server.py"), str(port)]
        return hearth_command(port)

    servers = [start_server(command(ROOT, PORT), BASE, "/api/extra/version")]
    bases = [BASE]
    try:
        if args.baseline is not None:
            baseline = command(args.baseline, BASELINE_PORT)
            servers.append(
                start_server(baseline, BASELINE, "/api/extra/version", cwd=args.baseline)
            )
            bases.append(BASELINE)
        results = run_cases(args.repeats, args.tokens, bases)
    finally:
        for server in servers:
            stop_server(server)
    print_table(results[0], args.tokens, args.repeats)
    if args.baseline is not None:
        print_comparison(results[0], results[1])


if __name__ == "__main__":
    main()
