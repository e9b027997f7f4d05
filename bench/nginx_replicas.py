"""Several Hearths behind nginx (deploy/nginx/hearth.conf) against one Hearth, same run.

    .venv/bin/python -m bench.nginx_replicas [--streams 6] [--tokens 48]

Peer: one instance with `--multiuser` room for every stream and all the machine's threads.
Replicas: two instances (`--multiuser 3` each, half the threads each) behind nginx. Both get
the same concurrent streamed /completion requests (greedy, `ignore_eos`); printed: streams
served, total tokens per second, the replicas/peer ratio, how the streams were spread, and
what happens when two more streams than there are places arrive at once (503s, never 502s).
On one machine the replicas share its cores, so the ratio shows the proxy's cost, not a
speed-up: the gain comes from instances on separate machines.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from bench.servers import THREADS, hearth_command, start_server, stop_server
from tests.support.nginx import start_nginx, stop_nginx
from tests.support.servers import free_port, wait_until_ready

PROBE = "/api/extra/version"
PLACES_PER_REPLICA = 3


def stream(base_url: str, tokens: int, results: list[tuple[int, int, str]]) -> None:
    body = {
        "prompt": "The river",
        "n_predict": tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
    }
    with (
        httpx.Client(timeout=600) as client,
        client.stream("POST", f"{base_url}/completion", json=body) as response,
    ):
        predicted = 0
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                predicted = event.get("tokens_predicted", predicted)
        results.append(
            (response.status_code, predicted, response.headers.get("x-hearth-upstream", ""))
        )


def run_streams(base_url: str, count: int, tokens: int) -> tuple[float, list[tuple[int, int, str]]]:
    results: list[tuple[int, int, str]] = []
    threads = [
        threading.Thread(target=stream, args=(base_url, tokens, results)) for _ in range(count)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, results


def tokens_per_second(seconds: float, results: list[tuple[int, int, str]]) -> float:
    return sum(predicted for status, predicted, _ in results if status == 200) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=2 * PLACES_PER_REPLICA)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()

    port = free_port()
    peer_url = f"http://127.0.0.1:{port}"
    peer = start_server(hearth_command(port, "--multiuser", str(args.streams)), peer_url, PROBE)
    try:
        run_streams(peer_url, 1, 4)  # warm-up
        peer_seconds, peer_results = run_streams(peer_url, args.streams, args.tokens)
    finally:
        stop_server(peer)

    replicas = []
    ports = [free_port() for _ in range(2)]
    half = str(max(1, THREADS // 2))
    try:
        for replica_port in ports:
            command = hearth_command(
                replica_port, "--multiuser", str(PLACES_PER_REPLICA), "--threads", half
            )
            replicas.append(start_server(command, f"http://127.0.0.1:{replica_port}", PROBE))
        with tempfile.TemporaryDirectory() as folder:
            proxy_port = free_port()
            nginx = start_nginx(Path(folder), [f"127.0.0.1:{p}" for p in ports], proxy_port)
            proxy_url = f"http://127.0.0.1:{proxy_port}"
            try:
                wait_until_ready(proxy_url)
                run_streams(proxy_url, 1, 4)  # warm-up
                proxy_seconds, proxy_results = run_streams(proxy_url, args.streams, args.tokens)
                over = 2 * PLACES_PER_REPLICA + 2
                _, over_results = run_streams(proxy_url, over, args.tokens)
            finally:
                stop_nginx(nginx)
    finally:
        for replica in replicas:
            stop_server(replica)

    peer_rate = tokens_per_second(peer_seconds, peer_results)
    proxy_rate = tokens_per_second(proxy_seconds, proxy_results)
    served = Counter(status for status, _, _ in proxy_results)
    spread = Counter(upstream.split(",")[-1].strip() for _, _, upstream in proxy_results)
    print(f"{args.streams} concurrent streams of {args.tokens} tokens (greedy, ignore_eos)")
    print(
        f"  one Hearth ({THREADS} threads):         {peer_rate:6.1f} tokens/s, "
        f"{Counter(s for s, _, _ in peer_results)[200]} of {args.streams} served"
    )
    print(
        f"  two Hearths behind nginx ({half} each): {proxy_rate:6.1f} tokens/s, "
        f"{served[200]} of {args.streams} served, per instance {sorted(spread.values())}"
    )
    print(f"  ratio replicas / one: {proxy_rate / peer_rate:.2f}")
    over_statuses = Counter(status for status, _, _ in over_results)
    print(
        f"  {over} at once through nginx (room for {2 * PLACES_PER_REPLICA}): "
        f"{dict(sorted(over_statuses.items()))}"
    )


if __name__ == "__main__":
    main()
