"""ContextShift: a chat that outgrows the context is trimmed at the front and the KV cache is
shifted, so the next reply starts about as fast as one after a short prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import httpx

from tests.support.real_server import GENERATE, perf
from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]
OPENING = "The lighthouse keeper wrote in his log every night. " * 36  # about 400 tokens


def grow_chat(server: RunningServer, turns: int) -> list[float]:
    """Continue one story turn after turn; return each turn's prompt processing seconds."""
    story, seconds = OPENING, []
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        for turn in range(turns):
            body = {
                "prompt": story,
                "memory": "[A story about the sea.]\n",
                "max_length": 40,
                "ban_eos_token": True,
                "sampler_seed": turn,
            }
            story += client.post(GENERATE, json=body).json()["results"][0]["text"] + " Then,"
            seconds.append(perf(server)["last_process_time"])
    return seconds


def test_context_shift_keeps_the_next_reply_fast(start_hearth: StartHearth) -> None:
    shifting = start_hearth(["--contextsize", "512"])
    printed_before = len(shifting.output)
    with_shift = grow_chat(shifting, 4)
    assert "ContextShift: kept" in shifting.wait_for_output("ContextShift", after=printed_before)

    recomputing = start_hearth(["--contextsize", "512", "--noshift"])
    without_shift = grow_chat(recomputing, 4)
    # Once the context is full, recomputing reads ~470 tokens again; shifting reads a few.
    assert with_shift[-1] * 5 < without_shift[-1]
    # As fast as before it filled (within the drift of a machine shared with other work).
    assert with_shift[-1] < 4 * max(with_shift[1], 0.02)
