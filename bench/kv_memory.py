"""The KV cache's type and flash attention: memory at a 32k context and time to first token,
Hearth against llama-server from the same llama.cpp (bench/build_llama_server.sh), one run.

    .venv/bin/python -m bench.kv_memory [--repeats 3] [--only memory|ttft]

Memory. The KV cache's bytes are measured as a process's memory: the server's resident set
(VmRSS from /proc, summed over the process and any children; Hearth runs its engine in its own
process, so that is one process) once loaded at `--contextsize 32768`, minus the same at 1024,
for an f16 and a q8_0 cache (flash attention on in every memory run, since a quantized V cache
needs it). What else depends on the context is small beside the cache (the part of the compute
buffer a short request touches), so the difference is the cache's growth; q8_0 stores 34 bytes
per 32 values against f16's 64, so the q8_0 / f16 ratio should be 34/64 = 0.53. llama.cpp
clears a new KV buffer, so all its pages are resident from the load on; a buffer reserved but
not yet written (most of the compute buffer) is not resident and not counted, though on a GPU
it would be allocated memory.
The weights are memory-mapped (both servers' default, kept): their pages count in VmRSS too
(as RssFile). Each run makes one short request before it is measured, so the same weights'
pages are touched at both contexts and cancel in the difference; the table also shows the
difference of RssAnon alone (anonymous memory: the cache and buffers, no file pages), which
does not depend on what of the file is resident, as a check. Loading with mmap off instead
(`--load-mode none` / `-lm none`, both servers) gives the same differences (checked once by
hand); mapped is what users run. Both prompt caches in RAM are off (`--cacheram 0`,
`-cram 0`) so nothing but the slot's cache holds KV data.
Cross-checks: llama-server logs its caches' sizes (`llama_kv_cache: size = N MiB`, at `-lv 4`),
summed here; Hearth does not log llama.cpp's lines, so its row shows its own memory estimate
(server/models/memory.py, the launcher's and Auto GPU layers' figure) instead.

Like-for-like. Hearth creates its context with `swa_full` (Gemma 3's sliding-window layers keep
a cache for the whole context, which partial cache removal, and so prefix reuse, needs);
llama-server by default keeps only the window (plus a batch) on those layers, 15 of the bundled
model's 18. So `llama-server --swa-full` is Hearth's like-for-like peer; plain `llama-server` is
shown for what its default costs, not as a comparison of the same work.

Time to first token: a deterministic prompt of about 1,500 tokens (counted by each server's
/tokenize), `n_predict` 1, `cache_prompt: false`, its first line different in every request,
at a 4096 context; f16 with flash attention on and off, and q8_0 with it on. All nine servers
(three servers, three cases) are started at once, each on its own port, and each makes one
warm-up request with the long prompt (so its buffers and weights are touched); then each
repetition sends one request to each in turn (the order rotated every repetition), timed by the
client from sending to the answer (with one token: the time to the first token); the client's
time less the server's own `timings.prompt_ms` is shown too (HTTP, queue, one token). So the
figures compared were measured seconds apart: a machine that slows down during the run (other
work on its cores) affects each alike. An idle server waits without using the CPU. Prints
medians, the fastest of the repetitions (the least disturbed on a busy machine) and the ratios
of both.
"""

from __future__ import annotations

import argparse
import re
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
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
from server.models.files import bundled_model_path
from server.models.gguf import gguf_summary
from server.models.memory import KvCacheLayout, estimate_memory

SMALL, LARGE = 1024, 32768  # contexts of the memory runs
KV_TYPES = ("f16", "q8_0")
TTFT_CASES = (("f16", "on"), ("f16", "off"), ("q8_0", "on"))  # (KV type, flash attention)
MIB = 2**20
WORDS = ("apple", "river", "stone", "cloud", "lantern", "harbor", "meadow", "copper", "willow",
         "ember", "falcon", "garnet")  # fmt: skip


@dataclass(frozen=True)
class Variant:
    name: str
    hearth: bool
    swa_full: bool


VARIANTS = (
    Variant("Hearth", hearth=True, swa_full=True),
    Variant("llama-server --swa-full", hearth=False, swa_full=True),
    Variant("llama-server", hearth=False, swa_full=False),
)
PEER = VARIANTS[1]  # Hearth's like-for-like peer


@dataclass
class Memory:
    rss: float  # MiB, VmRSS of the process tree
    anon: float  # MiB, RssAnon of the process tree
    logged_kv: float | None  # MiB, llama.cpp's own KV cache sizes, summed, where it logs them
    processes: int


@dataclass
class Results:
    memory: dict[tuple[str, str, int], list[Memory]] = field(default_factory=dict)
    ttft: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)  # seconds
    prompt_ms: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    prompt_tokens: dict[str, int] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command(
    variant: Variant, port: int, context: int, kv: str, fa: str, verbose: bool
) -> tuple[list[str], str]:
    """The command line and the readiness probe of one server in one configuration."""
    if variant.hearth:
        flags = ("--quantkv", kv, "-fa", fa, "--cacheram", "0")
        return hearth_command(port, *flags, context=context), "/api/extra/version"
    peer = [
        *(llama_server_binary(), "-m", str(bundled_model_path()), "--port", str(port)),
        *("-np", "1", "-t", str(THREADS), "-tb", str(THREADS), "-c", str(context)),
        *("--no-webui", "-ctk", kv, "-ctv", kv, "-fa", fa, "-cram", "0"),
        *(["--swa-full"] if variant.swa_full else []),
        *(["-lv", "4"] if verbose else []),  # the KV cache's size is logged at level 4
    ]
    return peer, "/health"


@contextmanager
def running(
    variant: Variant, context: int, kv: str, fa: str, log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    line, probe = command(variant, port, context, kv, fa, verbose=log is not None)
    with open(log or "/dev/null", "wb") as output:
        process = start_server(line, base, probe, log=output)
        try:
            yield process, base
        finally:
            stop_server(process)


def complete(base: str, prompt: str, tokens: int) -> dict[str, object]:
    body = {"prompt": prompt, "n_predict": tokens, "cache_prompt": False, "temperature": 0}
    answer = httpx.post(base + "/completion", json=body, timeout=600)
    answer.raise_for_status()
    result: dict[str, object] = answer.json()
    return result


# -- memory ---------------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    pids, index = [pid], 0
    while index < len(pids):
        for task in Path(f"/proc/{pids[index]}/task").glob("*"):
            children = (task / "children").read_text().split()
            pids.extend(int(child) for child in children)
        index += 1
    return pids


def resident(pids: list[int]) -> tuple[float, float]:
    """(VmRSS, RssAnon) of the processes together, MiB."""
    totals = {"VmRSS:": 0, "RssAnon:": 0}
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, *rest = line.split()
            if key in totals:
                totals[key] += int(rest[0])  # kB
    return totals["VmRSS:"] / 1024, totals["RssAnon:"] / 1024


def logged_kv(log: Path) -> float | None:
    sizes = re.findall(r"llama_kv_cache: size =\s*([\d.]+) MiB", log.read_text(errors="replace"))
    return sum(float(size) for size in sizes) if sizes else None


def measure_memory(variant: Variant, context: int, kv: str, folder: Path) -> Memory:
    log = folder / "server.log"
    with running(variant, context, kv, "on", log) as (process, base):
        complete(base, "Hello there.", 2)  # the same weights' pages touched at every context
        time.sleep(0.5)
        pids = process_tree(process.pid)
        rss, anon = resident(pids)
    figure = None if variant.hearth else logged_kv(log)
    return Memory(rss, anon, figure, len(pids))


def estimated_kv(kv: str, context: int) -> float:
    """Hearth's own estimate of a full-size (swa_full) cache, MiB."""
    estimate = estimate_memory(
        gguf_summary(bundled_model_path()), context, 512, KvCacheLayout(kv, kv)
    )
    return estimate.layers * estimate.kv_layer_bytes / MIB


# -- time to first token --------------------------------------------------------------------


def long_prompt(first_line: str) -> str:
    """About 1,500 tokens of plain prose, the same every run but for its first line."""
    lines = [
        f"Entry {n}: the {WORDS[n % 12]} near the {WORDS[(n * 5 + 3) % 12]} was logged at "
        f"{n % 24} hours, {n * 7 % 60} minutes, with {n * 13 % 97} more still to count."
        for n in range(46)
    ]
    return first_line + "\n" + "\n".join(lines) + "\nSummary:"


def count_tokens(base: str) -> int:
    answer = httpx.post(base + "/tokenize", json={"content": long_prompt("Run 0.")}, timeout=60)
    answer.raise_for_status()
    return len(answer.json()["tokens"])


def ttft_servers(stack: ExitStack) -> dict[tuple[str, str, str], str]:
    """Every server of every time-to-first-token case, started and warmed up: base URLs."""
    servers = {}
    for kv, fa in TTFT_CASES:
        for variant in VARIANTS:
            print(f"starting {variant.name} {kv} FA {fa}", flush=True)
            _process, base = stack.enter_context(running(variant, CONTEXT, kv, fa))
            complete(base, long_prompt(f"Warm-up {time.monotonic_ns()}."), 1)
            servers[variant.name, kv, fa] = base
    return servers


def measure_ttft(repeats: int, results: Results) -> None:
    with ExitStack() as stack:
        servers = ttft_servers(stack)
        for (name, _kv, _fa), base in servers.items():
            results.prompt_tokens.setdefault(name, count_tokens(base))
        keys = list(servers)
        for index in range(repeats):
            print(f"repetition {index + 1}: time to first token", flush=True)
            shift = index % len(keys)  # no server always first after a pause
            for key in keys[shift:] + keys[:shift]:
                started = time.perf_counter()
                answer = complete(servers[key], long_prompt(f"Run {index} {key}."), 1)
                results.ttft.setdefault(key, []).append(time.perf_counter() - started)
                timings = answer.get("timings")
                if isinstance(timings, dict) and "prompt_ms" in timings:
                    results.prompt_ms.setdefault(key, []).append(float(timings["prompt_ms"]))


# -- the report -----------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def growth(results: Results, name: str, kv: str) -> tuple[float, float, float | None]:
    """Medians of (VmRSS, RssAnon, llama.cpp's logged size) at LARGE minus at SMALL, MiB."""
    pairs = list(zip(results.memory[name, kv, SMALL], results.memory[name, kv, LARGE], strict=True))
    rss = median([large.rss - small.rss for small, large in pairs])
    anon = median([large.anon - small.anon for small, large in pairs])
    logged = [
        large.logged_kv - small.logged_kv
        for small, large in pairs
        if small.logged_kv is not None and large.logged_kv is not None
    ]
    return rss, anon, median(logged) if logged else None


def report_memory(results: Results, repeats: int) -> None:
    print(
        f"\nKV cache memory: resident memory at context {LARGE} minus at {SMALL} (MiB, median "
        f"of {repeats}), flash attention on, {THREADS} threads, bundled model, mmap"
    )
    print(f"  {'server':25s} {'KV':5s} {'RSS ' + str(SMALL):>9s} {'RSS ' + str(LARGE):>10s} "
          f"{'RSS growth':>11s} {'anon growth':>12s} {'llama.cpp says':>15s}")  # fmt: skip
    for variant in VARIANTS:
        for kv in KV_TYPES:
            small = median([m.rss for m in results.memory[variant.name, kv, SMALL]])
            large = median([m.rss for m in results.memory[variant.name, kv, LARGE]])
            rss, anon, logged = growth(results, variant.name, kv)
            if variant.hearth:
                said = f"~{estimated_kv(kv, LARGE) - estimated_kv(kv, SMALL):.0f} est."
            else:
                said = "-" if logged is None else f"{logged:.1f}"
            print(f"  {variant.name:25s} {kv:5s} {small:9.0f} {large:10.0f} {rss:11.1f} "
                  f"{anon:12.1f} {said:>15s}")  # fmt: skip
    processes = max(m.processes for ms in results.memory.values() for m in ms)
    print(f"  (at most {processes} process(es) per server measured)")
    print("\nRatios (target: q8_0 / f16 = 34/64 = 0.53)")
    for variant in VARIANTS:
        (f16, anon16, _), (q8, anon8, _) = (growth(results, variant.name, kv) for kv in KV_TYPES)
        print(f"  {variant.name:25s} q8_0 / f16: RSS {q8 / f16:.3f}, anon {anon8 / anon16:.3f}")
    for kv in KV_TYPES:
        ours, peer = growth(results, "Hearth", kv)[0], growth(results, PEER.name, kv)[0]
        print(f"  Hearth / {PEER.name} (like-for-like), {kv} RSS growth: {ours / peer:.3f}")


def overhead(results: Results, name: str) -> float:
    """Milliseconds of a request that are not the prompt's reading: HTTP, queue, one token."""
    key = (name, *TTFT_CASES[0])
    server_ms = results.prompt_ms.get(key, [])
    pairs = zip(results.ttft[key], server_ms, strict=False)
    return median([seconds * 1000 - ms for seconds, ms in pairs])


def report_ttft(results: Results, repeats: int) -> None:
    counts = ", ".join(f"{name} {count}" for name, count in results.prompt_tokens.items())
    print(
        f"\nTime to first token: prompt of {counts} tokens (/tokenize), context {CONTEXT}, "
        f"{THREADS} threads, n_predict 1, no cache; seconds, median [fastest] of {repeats}"
    )
    print(f"  {'server':25s}" + "".join(f"{f'{kv} FA {fa}':>20s}" for kv, fa in TTFT_CASES))
    for variant in VARIANTS:
        cells = [
            f"{median(times):7.2f} [{min(times):6.2f}]"
            for times in (results.ttft[variant.name, kv, fa] for kv, fa in TTFT_CASES)
        ]
        print(f"  {variant.name:25s}" + "".join(f"{cell:>20s}" for cell in cells))
    overheads = ", ".join(f"{v.name} {overhead(results, v.name):.0f}" for v in VARIANTS)
    print(f"  client time - server's prompt_ms (f16 FA on, median ms): {overheads}")

    def ratio(first: tuple[str, str, str], second: tuple[str, str, str]) -> str:
        ones, others = results.ttft[first], results.ttft[second]
        return f"{median(ones) / median(others):.3f} [{min(ones) / min(others):.3f}]"

    print("\nRatios of medians [of fastest] (time: lower is faster)")
    for kv, fa in TTFT_CASES:
        mine = ("Hearth", kv, fa)
        print(f"  {kv:4s} FA {fa:3s}  Hearth / {PEER.name} {ratio(mine, (PEER.name, kv, fa))}"
              f"   (Hearth / llama-server {ratio(mine, ('llama-server', kv, fa))})")  # fmt: skip
    for variant in VARIANTS:
        on, off, q8 = ((variant.name, kv, fa) for kv, fa in TTFT_CASES)
        print(f"  {variant.name:25s} f16 FA on / off {ratio(on, off)}   q8_0 / f16 (FA on) "
              f"{ratio(q8, on)}")  # fmt: skip


def measure_all_memory(repeats: int, results: Results) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for index in range(repeats):
            for kv in KV_TYPES:
                for context in (SMALL, LARGE):
                    for variant in VARIANTS:
                        print(f"repetition {index + 1}: memory, {variant.name} {kv} {context}",
                              flush=True)  # fmt: skip
                        sample = measure_memory(variant, context, kv, Path(folder))
                        results.memory.setdefault((variant.name, kv, context), []).append(sample)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["memory", "ttft"], help="run one part alone")
    args = parser.parse_args()
    llama_server_binary()  # build it (once) before anything is measured
    results = Results()
    if args.only != "ttft":
        measure_all_memory(args.repeats, results)
        report_memory(results, args.repeats)
    if args.only != "memory":
        measure_ttft(args.repeats, results)
        report_ttft(results, args.repeats)


if __name__ == "__main__":
    main()
