"""Talking to a real server over KoboldAI's routes: waiting, its perf figures, a timed stream."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.support.servers import RunningServer

STREAM = "/api/extra/generate/stream"


GENERATE = "/api/v1/generate"
# A long, steady generation: no early end of text, a fixed seed.
STEADY = {"ban_eos_token": True, "temperature": 0.7, "sampler_seed": 7}


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, step: float = 0.02) -> float:
    """Poll the server until `condition` holds; return the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError("condition not reached in time")
        time.sleep(step)
    return time.monotonic() - started


def tokens_time(server: RunningServer, tokens: int = 60) -> float:
    """Seconds this server takes to generate `tokens` tokens, measured now (call it while the
    server is idle): a bound for "soon" that scales with the machine, where a fixed number of
    seconds would fail on a slower or busier one."""
    httpx.post(
        f"{server.base_url}{GENERATE}",
        json={"prompt": "Measure:", "max_length": 16, **STEADY},
        timeout=60,
    )
    stats = perf(server)
    return tokens * stats["last_eval_time"] / max(stats["last_token_count"], 1)


def perf(server: RunningServer) -> dict[str, Any]:
    return dict(httpx.get(f"{server.base_url}/api/extra/perf").json())


def check_text(server: RunningServer, genkey: str) -> str:
    response = httpx.post(f"{server.base_url}/api/extra/generate/check", json={"genkey": genkey})
    return str(response.json()["results"][0]["text"])
