"""Requests admitted into the engine's free slots together, in one turn, so that their
decodes are shaped alike each time (see `in_one_turn`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import httpx

from tests.support.real_server import (
    STREAM,
    perf,
    wait_for,
)
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

# Without a genkey: an abort without one, while others wait, reaches every running request
# that has none, all at once (the worker lets nobody join until all of them have left).
HOLD = {"prompt": "Hold:", "max_length": 1000, "grammar": 'root ::= "b" root'}


def in_one_turn(
    server: RunningServer, requests: Sequence[tuple[int, Callable[[], Any]]]
) -> list[Any]:
    """Call each request (with how many jobs it queues: n for n choices) in a thread of its
    own, one after another, while holds fill every slot of the engine; once all wait in
    line, abort the holds together, and return what each call returned, in order.

    The worker then admits them in arrival order into its free slots in one turn, so that
    requests sent this way share their decodes alike each time. Texts of batched requests
    are compared only between such turns: a sequence's logits depend on which other sequences
    share its decodes and where in them it sits (by how much depends on the CPU, and a
    near-tied token may flip). Which slot a request takes
    (and so where it sits) follows what the slots hold, so a test compares only turns that
    come after a first one of its own: the first finds the slots holding other prompts."""
    queued = 0

    def all_waiting() -> bool:
        return int(perf(server)["queue"]) == queued

    slots = int(httpx.get(f"{server.base_url}/props", timeout=30).json()["total_slots"])
    with (
        ThreadPoolExecutor(len(requests)) as pool,  # left last: after a failure, the holds end
        httpx.Client(base_url=server.base_url, timeout=120) as client,
        ExitStack() as holding,
    ):
        holds = [
            iter_sse(holding.enter_context(client.stream("POST", STREAM, json=HOLD)))
            for _ in range(slots)
        ]
        for events in holds:
            next(events)  # each hold is generating
        answers = []
        for jobs, request in requests:
            answers.append(pool.submit(request))
            queued += jobs
            wait_for(all_waiting)
        assert client.post("/api/extra/abort", json={}).json() == {
            "success": "true",
            "done": "true",
        }
        for events in holds:
            assert [event.json()["finish_reason"] for event in events if event.data][-1] == "abort"
        return [answer.result(timeout=300) for answer in answers]
