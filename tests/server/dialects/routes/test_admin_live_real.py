"""The launcher's live view of requests on the real model, two parallel slots, real HTTP: a
long prompt's progress batch by batch, live speed while generating, and an abort that ends one
of two batched streams while the other finishes normally."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest

from tests.support.real_server import STREAM, wait_for
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

TOKEN = "launcher-token-for-real-tests"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
StartHearth = Callable[..., RunningServer]


@pytest.fixture(scope="module")
def live(start_hearth: StartHearth) -> RunningServer:
    return start_hearth(
        ["--parallelrequests", "2", "--multiuser", "0", "--contextsize", "8192"],
        env={"HEARTH_ADMIN_TOKEN": TOKEN},
    )


def rows(server: RunningServer) -> list[dict[str, Any]]:
    answer = httpx.get(f"{server.base_url}/api/admin/requests", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["requests"]
    return found


class Streamed:
    """A KoboldAI stream read on its own thread: its tokens and final event."""

    def __init__(self, server: RunningServer, body: dict[str, Any]) -> None:
        self.tokens: list[str] = []
        self.final: dict[str, Any] = {}
        self.done = threading.Event()
        threading.Thread(target=self._read, args=(server, body), daemon=True).start()

    def _read(self, server: RunningServer, body: dict[str, Any]) -> None:
        with (
            httpx.Client(base_url=server.base_url, timeout=120) as client,
            client.stream("POST", STREAM, json=body) as response,
        ):
            try:
                for event in iter_sse(response):
                    data = event.json() if event.data else None
                    if data is None:
                        continue
                    if data.get("finish_reason") is None:
                        self.tokens.append(data.get("token", repr(data)))
                    else:
                        self.final = data
            finally:
                self.done.set()


def states_seen(server: RunningServer, until: threading.Event) -> Sequence[dict[str, Any]]:
    """Every row seen while polling until `until` is set."""
    seen: list[dict[str, Any]] = []
    while not until.wait(0.02):  # a polling gap, so the poller leaves the cores to the model
        seen += rows(server)
    return seen


def test_a_long_prompt_shows_its_progress_then_generates(live: RunningServer) -> None:
    prompt = " ".join(f"line {i} of a long log that the model reads first." for i in range(100))
    body = {"prompt": prompt, "max_length": 16, "ban_eos_token": True, "genkey": "KCPPLONG"}
    streamed = Streamed(live, body)
    seen = states_seen(live, streamed.done)
    assert streamed.final["finish_reason"] == "length"
    reading = [row for row in seen if row["state"] == "prompt" and row["prompt_total"]]
    # llama.cpp reads the prompt in blocks: the row said how far it had got in between.
    assert any(0 < row["prompt_done"] < row["prompt_total"] for row in reading), reading[:3]
    total = reading[0]["prompt_total"]
    assert total > 1000  # many 64-token blocks
    done = [row["prompt_done"] for row in reading]
    assert done == sorted(done)
    generating = [row for row in seen if row["state"] == "generating"]
    assert generating and all(row["prompt_done"] == total for row in generating)
    assert {row["dialect"] for row in seen} == {"kobold"}
    assert {row["genkey"] for row in seen} == {"KCPPLONG"}


def test_abort_ends_one_batched_stream_and_the_other_finishes(live: RunningServer) -> None:
    kept = Streamed(live, {"prompt": "Once upon a time", "max_length": 120, "ban_eos_token": True})
    doomed = Streamed(
        live, {"prompt": "The sea was", "max_length": 2000, "ban_eos_token": True, "genkey": "KD"}
    )

    def both_generating() -> bool:
        now = rows(live)
        return len(now) == 2 and all(r["state"] == "generating" and r["tokens"] > 2 for r in now)

    wait_for(both_generating, timeout=120)
    speeds = httpx.get(f"{live.base_url}/api/admin/requests", headers=ADMIN).json()
    assert speeds["generating"] == 2
    assert speeds["tokens_per_second"] > 0
    perf = httpx.get(f"{live.base_url}/api/extra/perf").text
    for row in speeds["requests"]:
        assert row["id"] not in perf
    doomed_id = next(row["id"] for row in speeds["requests"] if row["genkey"] == "KD")
    answer = httpx.post(f"{live.base_url}/api/admin/abort", headers=ADMIN, json={"id": doomed_id})
    assert answer.status_code == 200, answer.text
    assert doomed.done.wait(60)
    assert doomed.final["finish_reason"] == "abort", doomed.tokens[-3:]
    assert len(doomed.tokens) < 2000
    assert not kept.done.is_set() or kept.final["finish_reason"] == "length"
    assert kept.done.wait(120)
    assert kept.final["finish_reason"] == "length"
    assert len("".join(kept.tokens)) > 0
    assert rows(live) == []
