"""What a resumable stream costs, and how fast a dropped one comes back, on the real model.

    .venv/bin/python -m bench.resumable [--runs 5] [--tokens 128]

Peer: the same KoboldAI stream without the opt-in, measured in the same run, alternating.
Printed: the median seconds of a whole stream each way and their ratio (resumable / plain),
then for cut streams: the median time from asking `GET /api/extra/stream/{genkey}` with
`Last-Event-ID` to its first event, and whether every event came exactly once.
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from bench.servers import hearth_command, start_server, stop_server
from tests.support.servers import free_port
from tests.support.sse import SSEEvent, iter_sse

PROBE = "/api/extra/version"


def body(tokens: int, genkey: str, resumable: bool) -> dict[str, object]:
    return {
        "prompt": "The river",
        "max_length": tokens,
        "ban_eos_token": True,
        "temperature": 0,
        "genkey": genkey,
        "resumable": resumable,
    }


def whole_stream(client: httpx.Client, tokens: int, genkey: str, resumable: bool) -> float:
    started = time.perf_counter()
    with client.stream(
        "POST", "/api/extra/generate/stream", json=body(tokens, genkey, resumable)
    ) as response:
        events = [event for event in iter_sse(response) if event.data]
    assert events[-1].json()["finish_reason"] == "length"
    return time.perf_counter() - started


def cut_and_resume(client: httpx.Client, tokens: int, genkey: str) -> tuple[float, bool]:
    """Seconds from the resume request to its first event; whether ids ran 0..n-1 once each."""
    seen: list[SSEEvent] = []
    with client.stream(
        "POST", "/api/extra/generate/stream", json=body(tokens, genkey, True)
    ) as response:
        for event in iter_sse(response):
            if event.data:
                seen.append(event)
            if len(seen) == 10:
                break
    asked = time.perf_counter()
    first_after = 0.0
    with client.stream(
        "GET", f"/api/extra/stream/{genkey}", headers={"Last-Event-ID": seen[-1].id or ""}
    ) as resumed:
        for event in iter_sse(resumed):
            if event.data:
                first_after = first_after or time.perf_counter() - asked
                seen.append(event)
    whole = [event.id for event in seen] == [str(i) for i in range(len(seen))]
    return first_after, whole and seen[-1].json()["finish_reason"] == "length"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(hearth_command(port), url, PROBE)
    plain: list[float] = []
    kept: list[float] = []
    resumes: list[float] = []
    intact = 0
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            whole_stream(client, 8, "warm-up", False)
            for run in range(args.runs):
                plain.append(whole_stream(client, args.tokens, f"plain-{run}", False))
                kept.append(whole_stream(client, args.tokens, f"kept-{run}", True))
                seconds, whole = cut_and_resume(client, args.tokens, f"cut-{run}")
                resumes.append(seconds)
                intact += whole
    finally:
        stop_server(server)

    plain_median, kept_median = statistics.median(plain), statistics.median(kept)
    print(f"{args.tokens}-token KoboldAI streams, {args.runs} runs each, medians:")
    print(f"  plain      {plain_median:.3f} s")
    ratio = kept_median / plain_median
    print(f"  resumable  {kept_median:.3f} s   ratio resumable/plain {ratio:.3f}")
    print(
        f"  cut after 10 events, resumed: first event {statistics.median(resumes) * 1000:.1f} ms "
        f"after asking; every event exactly once in {intact}/{args.runs}"
    )


if __name__ == "__main__":
    main()
