"""`make bench`: Hearth against llama.cpp's llama-server and llama-cpp-python's server, measured
one after another in the same session, same model, threads and context, over HTTP as a client
sees it. Prints medians and Hearth/peer ratios and writes docs/PERFORMANCE.md.

    .venv/bin/python bench/compare.py [--repeats 3] [--tokens 200]

Each repetition starts its prompt with a fresh line, so no server can reuse a cached prompt.
Servers run one at a time: on 2 cores, two servers side by side would measure each other.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.servers import (
    CONTEXT,
    THREADS,
    hearth_command,
    llama_server_binary,
    start_server,
    stop_server,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from server.models.files import bundled_model_path  # noqa: E402

PORT = 5097
BASE = f"http://127.0.0.1:{PORT}"
STORY = "Once upon a time, in a small village by the sea, there lived"
LONG_PARAGRAPH = (
    "The harbour town kept its records in a tall stone building near the water, and every "
    "season the clerks copied the names of the ships, their cargo and their crews into new "
    "ledgers, because the salt air ruined paper faster than anyone expected. "
)


@dataclass
class Figures:
    decode: list[float] = field(default_factory=list)  # tokens/s, one stream
    ttft_short: list[float] = field(default_factory=list)  # seconds
    ttft_long: list[float] = field(default_factory=list)
    aggregate: list[float] = field(default_factory=list)  # tokens/s, 4 streams
    rss_mb: float = 0.0


def fresh(index: int, text: str) -> str:
    return f"Run {index} {time.monotonic_ns()}.\n{text}"


def stream_completion(prompt: str, tokens: int) -> tuple[float, float, int]:
    """(time to first text, decode tokens/s, text chunks) for one /v1/completions stream."""
    body = {
        "prompt": prompt,
        "max_tokens": tokens,
        "stream": True,
        "temperature": 0.7,
        "top_k": 100,
        "top_p": 0.9,
        "seed": 1,
        "ignore_eos": True,
    }
    started = time.perf_counter()
    arrivals: list[float] = []
    with httpx.stream("POST", f"{BASE}/v1/completions", json=body, timeout=300) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            payload = json.loads(line[6:])
            choices = payload.get("choices") or []
            if choices and choices[0].get("text"):
                arrivals.append(time.perf_counter())
    first = arrivals[0] - started
    rate = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
    return first, rate, len(arrivals)


def aggregate_rate(tokens: int, streams: int, index: int) -> float:
    counts: list[int] = []
    barrier = threading.Barrier(streams)

    def one(stream: int) -> None:
        barrier.wait()
        # A server that drops concurrent streams gets no credit for them.
        with contextlib.suppress(httpx.HTTPError):
            counts.append(stream_completion(fresh(index * 10 + stream, STORY), tokens)[2])

    threads = [threading.Thread(target=one, args=(s,)) for s in range(streams)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_server(command: Sequence[str], probe: str) -> subprocess.Popen[bytes]:
    return start_server(command, BASE, probe)


@dataclass
class Server:
    name: str
    command: list[str]
    probe: str


def one_stream_figures(server: Server, figures: Figures, index: int, tokens: int) -> None:
    """Start the server, measure one stream and both first-token times, stop it."""
    process = run_server(server.command, server.probe)
    try:
        stream_completion(fresh(-1, STORY), 8)  # warm-up
        figures.rss_mb = max(figures.rss_mb, rss_mb(process.pid))
        first, rate, _ = stream_completion(fresh(index, STORY), tokens)
        figures.decode.append(rate)
        figures.ttft_short.append(first)
        figures.ttft_long.append(stream_completion(fresh(index, LONG_PARAGRAPH * 38), 4)[0])
    finally:
        stop_server(process)


def four_stream_figures(server: Server, figures: Figures, index: int, tokens: int) -> None:
    process = run_server(server.command, server.probe)
    try:
        stream_completion(fresh(-1, STORY), 8)
        figures.aggregate.append(aggregate_rate(tokens, 4, index))
    finally:
        stop_server(process)


def scripted_events_per_second(events: int) -> float:
    """Hearth's HTTP path alone: a scripted engine with no model time, one SSE event per
    token, read by a client in this process while the server runs in another."""
    scripted = [sys.executable, str(ROOT / "bench" / "scripted_server.py"), str(PORT)]
    process = run_server(scripted, "/api/extra/version")
    try:
        body = {"prompt": "x", "max_length": events}
        rates = []
        for _ in range(3):
            started = time.perf_counter()
            count = 0
            with httpx.stream(
                "POST", f"{BASE}/api/extra/generate/stream", json=body, timeout=300
            ) as response:
                for chunk in response.iter_bytes():
                    count += chunk.count(b"\n\n")
            rates.append(count / (time.perf_counter() - started))
        return statistics.median(rates)
    finally:
        stop_server(process)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=200)
    args = parser.parse_args()
    model = str(bundled_model_path())
    llama_server = llama_server_binary()
    hearth = hearth_command(PORT)
    peer = [
        llama_server,
        "-m",
        model,
        "--port",
        str(PORT),
        "-t",
        str(THREADS),
        "-tb",
        str(THREADS),
        "-c",
        str(CONTEXT),
        "--no-webui",
    ]
    python_server = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        model,
        "--port",
        str(PORT),
        "--n_threads",
        str(THREADS),
        "--n_threads_batch",
        str(THREADS),
        "--n_ctx",
        str(CONTEXT),
    ]
    single = [
        Server("Hearth", hearth, "/api/extra/version"),
        Server("llama-server", [*peer, "-np", "1"], "/health"),
        Server("llama-cpp-python server", python_server, "/v1/models"),
    ]
    batched = [
        Server("Hearth", [*hearth, "--parallelrequests", "4"], "/api/extra/version"),
        Server("llama-server", [*peer, "-np", "4"], "/health"),
        Server("Hearth sequential", hearth, "/api/extra/version"),
    ]
    results = {
        name: Figures()
        for name in ("Hearth", "llama-server", "llama-cpp-python server", "Hearth sequential")
    }
    # Repetitions interleave the servers, so a machine that speeds up or slows down during
    # the run affects every server alike.
    for index in range(args.repeats):
        for server in single:
            print(f"repetition {index + 1}: {server.name}, one stream", flush=True)
            one_stream_figures(server, results[server.name], index, args.tokens)
        for server in batched:
            print(f"repetition {index + 1}: {server.name}, four streams", flush=True)
            four_stream_figures(server, results[server.name], index, args.tokens)
    events = scripted_events_per_second(20_000)
    report(results, events, args)


def report(results: dict[str, Figures], events: float, args: argparse.Namespace) -> None:
    hearth, peer, python_peer = (
        results["Hearth"],
        results["llama-server"],
        results["llama-cpp-python server"],
    )
    sequential = results["Hearth sequential"]
    rows = [
        ("decode tokens/s, 1 stream", [median(f.decode) for f in (hearth, peer, python_peer)]),
        (
            "first token, short prompt (ms)",
            [1000 * median(f.ttft_short) for f in (hearth, peer, python_peer)],
        ),
        (
            "first token, ~1500-token prompt (ms)",
            [1000 * median(f.ttft_long) for f in (hearth, peer, python_peer)],
        ),
        (
            "aggregate tokens/s, 4 streams",
            [median(f.aggregate) for f in (hearth, peer, python_peer)],
        ),
        ("resident memory (MB)", [f.rss_mb for f in (hearth, peer, python_peer)]),
    ]
    lines = [
        f"Bundled Gemma 3 270M Q4_K_M, {THREADS} threads, context {CONTEXT}, {args.tokens} "
        f"tokens per stream, median of {args.repeats}. Hearth parallel = "
        "`--parallelrequests 4`, llama-server `-np 4`.",
        "",
        "| measure | Hearth | llama-server | llama-cpp-python server | Hearth / llama-server |",
        "|---|---|---|---|---|",
    ]
    for label, (ours, theirs, python_value) in rows:
        ratio = ours / theirs if theirs else float("nan")
        lines.append(f"| {label} | {ours:.1f} | {theirs:.1f} | {python_value:.1f} | {ratio:.3f} |")
    parallel_gain = median(hearth.aggregate) / median(sequential.aggregate)
    lines += [
        "",
        f"- Time to first token, Hearth - llama-server: short "
        f"{1000 * (median(hearth.ttft_short) - median(peer.ttft_short)):+.1f} ms, ~1500 tokens "
        f"{1000 * (median(hearth.ttft_long) - median(peer.ttft_long)):+.1f} ms.",
        f"- 4 streams: Hearth parallel {median(hearth.aggregate):.1f} tokens/s vs Hearth "
        f"sequential {median(sequential.aggregate):.1f} (x {parallel_gain:.2f}).",
        f"- Hearth's HTTP path with a scripted engine (no model time): {events:,.0f} SSE events/s.",
    ]
    text = "\n".join(lines)
    print(text)
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, {_cpu_model()}, Python "
        f"{platform.python_version()}"
    )
    document = (
        "# Performance\n\nMeasured by `make bench` (`bench/compare.py`) on "
        f"{time.strftime('%Y-%m-%d')}: {machine}.\n\n{text}\n\nTargets (issue 5), as ratios "
        "measured side by side: single-stream decode ≥ 0.97x llama-server; time to first token "
        "within 10 ms of llama-server; 4-stream aggregate ≥ 0.9x llama-server `-np 4` and "
        "≥ 1.4x Hearth sequential; HTTP path ≥ 20,000 events/s.\n\n"
        "## Reading these figures\n\n"
        "- This 2-core VM drifts by about ±10% between runs, so each repetition restarts every "
        "server in turn (interleaved) and the medians are compared side by side.\n"
        "- Hearth attaches a persistent ggml thread pool to its context, as llama-server does; "
        "without it ggml builds a new pool for every decode, which cost ~10% of decode and "
        "prompt speed.\n"
        "- Hearth keeps Gemma 3's sliding-window cache full size (`swa_full`) so a long chat's "
        "prefix can be reused and shifted; that costs a little on a cold ~1500-token prompt "
        "(measured ~2% in an A/B run) and some memory, and saves whole prompts on every later "
        "turn.\n"
        "- With `--parallelrequests` Hearth turns weight repacking off and cuts prompts into "
        "64-token blocks so a request's logits stay close alone or batched; the 4-stream gain "
        "over sequential measured 1.34x to 1.62x across runs (llama-server's -np 4 over -np 1: "
        "about 1.5x).\n"
        "- llama-cpp-python's server runs one request at a time and dropped concurrent "
        "streams, so it has no 4-stream figure.\n"
    )
    document += GPU_NOTE
    (ROOT / "docs" / "PERFORMANCE.md").write_text(document)


# Kept by hand (this script measures on the CPU): what is known about GPUs.
GPU_NOTE = """
## On a GPU

No GPU figures yet. `make install` builds llama.cpp with the Vulkan backend (and `make install
GPU=cuda` with CUDA), but no session that worked on it had a GPU machine, and no figure is
invented here. The one Vulkan device on this machine is Mesa's lavapipe (llvmpipe), a software
rasteriser running on these same 2 cores: the Vulkan tests use it to check behaviour, and its
speed (a few tokens per second once its shaders are compiled, seconds per token before) says
nothing about a GPU. Where no GPU is chosen the Vulkan build runs on the CPU as fast as the
CPU-only build: `bench/engine_speed.py --repeats 3`, 2026-11-30, same machine, one after the
other: bare decode loop 38.9 tokens/s (Vulkan build) vs 40.5 (CPU build), Hearth's engine
40.8 vs 38.3: both within this VM's ±10% drift.
"""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    main()
