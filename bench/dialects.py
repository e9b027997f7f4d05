"""Streaming speed of each dialect against the KoboldAI stream, measured in the same run.

    .venv/bin/python bench/dialects.py [--tokens 150] [--repeats 3]

Starts `python -m server` on the bundled model and streams the same prompt through every
dialect with a raw HTTP client, so only the server's framing differs. Prints, per dialect, the
median time to the first text and text events per second, and their ratio to KoboldAI SSE.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.servers import hearth_command, start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
PORT = 5098
BASE = f"http://127.0.0.1:{PORT}"
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


def measure(path: str, body: dict[str, object], has_text: Extractor) -> tuple[float, float]:
    started = time.perf_counter()
    arrivals: list[float] = []
    with httpx.stream("POST", BASE + path, json=body, timeout=120) as response:
        for line in response.iter_lines():
            if has_text(line):
                arrivals.append(time.perf_counter())
    first = arrivals[0] - started
    rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
    return first, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    server = start_server(hearth_command(PORT), BASE, "/api/extra/version")
    try:
        results: dict[str, list[tuple[float, float]]] = {name: [] for name, *_ in CASES}
        for index in range(args.repeats):  # interleaved, so drift hits every dialect alike
            for name, path, template, has_text in CASES:
                body = body_for(path, template, args.tokens, index * 10 + len(results[name]))
                results[name].append(measure(path, body, has_text))
    finally:
        stop_server(server)
    base_first = statistics.median(f for f, _ in results["KoboldAI SSE"])
    base_rate = statistics.median(r for _, r in results["KoboldAI SSE"])
    print(f"bundled model, 2 threads, {args.tokens} tokens, median of {args.repeats}")
    print(f"  {'dialect':20s} {'first text':>11s} {'events/s':>9s} {'rate ratio':>11s}")
    for name, samples in results.items():
        first = statistics.median(f for f, _ in samples)
        rate = statistics.median(r for _, r in samples)
        print(
            f"  {name:20s} {first * 1000:9.0f}ms {rate:9.1f} {rate / base_rate:11.3f}"
            f"   (first text {1000 * (first - base_first):+.0f} ms vs KoboldAI)"
        )


if __name__ == "__main__":
    main()
