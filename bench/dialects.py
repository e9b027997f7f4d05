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
batching of bursts and the client's parsing. `--token-seconds S` paces it instead (one token per
S seconds, a pace the server keeps up with): every token is then its own event, and the server's
CPU per stream is the framing's cost alone, steady from run to run.

Beside the client's view (events per second, which the client's own parsing and the other
processes on the machine disturb), each stream's cost is read from the server itself: the CPU
seconds its process spent on the stream (Linux's /proc/PID/stat), compared as a median per
dialect. That is the figure that resolves a few percent: on 2 cores, wall-clock rates of one
checkout against itself spread by ±4% (model) to ±19% (scripted).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
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


def server_cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system, every thread) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    first: float  # seconds to the first text
    rate: float  # text events per second, as the client saw them
    cpu: float  # the server's CPU seconds for the whole stream


def measure(path: str, body: dict[str, object], has_text: Extractor, server: Server) -> Sample:
    base, pid = server
    cpu_before = server_cpu_seconds(pid)
    started = time.perf_counter()
    arrivals: list[float] = []
    with httpx.stream("POST", base + path, json=body, timeout=120) as response:
        for line in response.iter_lines():
            if has_text(line):
                arrivals.append(time.perf_counter())
    cpu = server_cpu_seconds(pid) - cpu_before
    first = arrivals[0] - started
    rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
    return Sample(first, rate, cpu)


Samples = dict[str, list[Sample]]
Server = tuple[str, int]  # base URL, process id


def run_cases(repeats: int, tokens: int, servers: list[Server]) -> list[Samples]:
    """Every case `repeats` times on each server; interleaved, so drift hits all alike."""
    results: list[Samples] = [{name: [] for name, *_ in CASES} for _ in servers]
    for index in range(repeats):
        for name, path, template, has_text in CASES:
            body = body_for(path, template, tokens, index * 10 + len(results[0][name]))
            order = list(enumerate(servers))
            if index % 2:
                order.reverse()  # neither server always goes first
            for which, server in order:
                results[which][name].append(measure(path, body, has_text, server))
    return results


def medians(samples: list[Sample]) -> tuple[float, float, float]:
    return (
        statistics.median(s.first for s in samples),
        statistics.median(s.rate for s in samples),
        statistics.median(s.cpu for s in samples),
    )


def print_table(results: Samples, tokens: int, repeats: int) -> None:
    base_first, base_rate, _ = medians(results["KoboldAI SSE"])
    print(f"{tokens} tokens, median of {repeats}")
    print(
        f"  {'dialect':20s} {'first text':>11s} {'events/s':>9s} {'rate ratio':>11s}"
        f" {'server CPU':>11s}"
    )
    for name, samples in results.items():
        first, rate, cpu = medians(samples)
        print(
            f"  {name:20s} {first * 1000:9.0f}ms {rate:9.1f} {rate / base_rate:11.3f}"
            f" {cpu * 1000:9.0f}ms   (first text {1000 * (first - base_first):+.0f} ms vs KoboldAI)"
        )


def print_comparison(now: Samples, before: Samples) -> None:
    """Ratios > 1: this checkout is faster (more events/s) or cheaper (less server CPU)."""
    print("this checkout against the baseline, same run (ratio > 1: this one is better)")
    print(
        f"  {'dialect':20s} {'events/s':>9s} {'baseline':>9s} {'ratio':>7s} {'vs Kobold':>9s}"
        f" {'CPU/stream':>11s} {'baseline':>9s} {'ratio':>7s} {'first text':>11s}"
    )
    _, kobold_rate, _ = medians(now["KoboldAI SSE"])
    _, old_kobold_rate, _ = medians(before["KoboldAI SSE"])
    for name in now:
        first, rate, cpu = medians(now[name])
        old_first, old_rate, old_cpu = medians(before[name])
        # The dialect's rate against its own server's KoboldAI stream, now over before: what a
        # dialect's framing changed, free of one server process being faster than the other.
        relative = (rate / kobold_rate) / (old_rate / old_kobold_rate)
        print(
            f"  {name:20s} {rate:9.1f} {old_rate:9.1f} {rate / old_rate:7.3f} {relative:9.3f}"
            f" {cpu * 1000:9.0f}ms {old_cpu * 1000:7.0f}ms {old_cpu / cpu:7.3f}"
            f" {1000 * (first - old_first):+9.0f}ms"
        )


def measure_round(
    args: argparse.Namespace, command: Callable[[Path, int], list[str]]
) -> list[Samples]:
    """Start the servers (this checkout's, and the baseline's), run every case, stop them."""
    processes = [start_server(command(ROOT, PORT), BASE, "/api/extra/version")]
    servers = [(BASE, processes[0].pid)]
    try:
        if args.baseline is not None:
            baseline = command(args.baseline, BASELINE_PORT)
            processes.append(
                start_server(baseline, BASELINE, "/api/extra/version", cwd=args.baseline)
            )
            servers.append((BASELINE, processes[1].pid))
        return run_cases(args.repeats, args.tokens, servers)
    finally:
        for process in processes:
            stop_server(process)


def merge(first: Samples, second: Samples) -> Samples:
    return {name: first[name] + second[name] for name in first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare against")
    parser.add_argument("--scripted", action="store_true", help="no model: the HTTP path alone")
    parser.add_argument("--rounds", type=int, default=1, help="fresh server processes each")
    parser.add_argument(
        "--token-seconds",
        type=float,
        default=0.0,
        help="with --scripted: one token per this many seconds (0: as fast as it can)",
    )
    args = parser.parse_args()

    def command(root: Path, port: int) -> list[str]:
        if args.scripted:  # this checkout's script, serving `root`'s code
            script = str(ROOT / "bench" / "scripted_server.py")
            pace = ["--token-seconds", str(args.token_seconds)]
            return [sys.executable, script, str(port), "--root", str(root), *pace]
        return hearth_command(port)

    # Each round starts fresh server processes: two processes of one checkout differ by a few
    # percent in the model's speed (memory placement), which rounds average out.
    results = measure_round(args, command)
    for _ in range(args.rounds - 1):
        measured = measure_round(args, command)
        results = [merge(a, b) for a, b in zip(results, measured, strict=True)]
    print_table(results[0], args.tokens, args.repeats)
    if args.baseline is not None:
        print_comparison(results[0], results[1])


if __name__ == "__main__":
    main()
