"""The bundled model on two RPC workers over loopback, against the same model run locally.

    .venv/bin/python -m bench.rpc_offload [--repeats 3] [--tokens 64]

Two `hearth rpc-worker`s (their CPU, one thread each) hold every layer of a Hearth started
with `--rpc … --gpulayers 99`; the peer is a Hearth on the local CPU with one thread and
repacking off (`--parallelrequests 2`), as a remote device has none. Both get the same greedy
/completion requests, alternately; printed: median prompt and generation tokens/s of each and
the RPC/local ratios. On one machine the workers share its cores, so this measures the RPC
round trips (one per decode and worker), not the gain of a second machine's memory.
"""

from __future__ import annotations

import argparse
import signal
import statistics

import httpx

from bench.servers import hearth_command, start_server, stop_server
from tests.support.rpc_worker import cpu_worker
from tests.support.servers import free_port

PROBE = "/api/extra/version"
PROMPT = "Once upon a time, in a village by the sea, there lived an old fisherman who"


def speeds(base_url: str, tokens: int) -> tuple[float, float]:
    body = {
        "prompt": PROMPT,
        "n_predict": tokens,
        "ignore_eos": True,
        "temperature": 0,
        "cache_prompt": False,
    }
    timings = httpx.post(f"{base_url}/completion", json=body, timeout=600).json()["timings"]
    return timings["prompt_per_second"], timings["predicted_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    worker_ports = [free_port() for _ in range(2)]
    workers = [cpu_worker(port) for port in worker_ports]
    servers = []
    try:
        endpoints = ",".join(f"127.0.0.1:{port}" for port in worker_ports)
        flags = {
            "local": ("--usecpu", "--parallelrequests", "2"),
            "rpc": ("--rpc", endpoints, "--gpulayers", "99"),
        }
        urls = {}
        for name, extra in flags.items():
            port = free_port()
            urls[name] = f"http://127.0.0.1:{port}"
            command = [*hearth_command(port, *extra), "--threads", "1"]
            servers.append(start_server(command, urls[name], PROBE))
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in urls}
        for name in urls:
            speeds(urls[name], 4)  # warm-up
        for _ in range(args.repeats):
            for name, url in urls.items():
                samples[name].append(speeds(url, args.tokens))
    finally:
        for server in servers:
            stop_server(server)
        for worker in workers:
            worker.send_signal(signal.SIGINT)
            worker.wait(timeout=30)
    medians = {
        name: (statistics.median(p for p, _ in runs), statistics.median(g for _, g in runs))
        for name, runs in samples.items()
    }
    print(
        f"{args.tokens} greedy tokens after a {len(PROMPT.split())}-word prompt, "
        f"median of {args.repeats}"
    )
    for name, (prompt, generated) in medians.items():
        label = "local CPU, 1 thread" if name == "local" else "2 RPC workers, 1 thread each"
        print(f"  {label:30} prompt {prompt:7.1f} tokens/s   generation {generated:6.1f} tokens/s")
    (local_prompt, local_gen), (rpc_prompt, rpc_gen) = medians["local"], medians["rpc"]
    print(
        f"  ratio RPC / local: prompt {rpc_prompt / local_prompt:.2f}, "
        f"generation {rpc_gen / local_gen:.2f}"
    )


if __name__ == "__main__":
    main()
