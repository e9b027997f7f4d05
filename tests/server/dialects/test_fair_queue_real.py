"""The fair queue over real HTTP: turns across API keys (every request below carries a Bearer
token; with no --password set the token is not checked, but it still says whose request it
is), `--multiuserperkey`'s 503 in every dialect, `--multiuser`'s exact count, and the line in
/api/extra/perf and the launcher's queue table.

Order is read from events, never from timing: a request is known to wait once perf counts it,
and the order requests were served in is the order the server logged them finished (one slot:
each ends before the next starts).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from pytestqt.qtbot import QtBot

from app.run_view import RunView
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
USER: list[Any] = [{"role": "user", "content": "Hi"}]
BUSY = "Server is busy; please try again later."


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def perf(server: RunningServer) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{server.base_url}/api/extra/perf", timeout=30).json()
    return answer


def until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Wait for a state the server reports (a readiness poll, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def labels_by_running(answer: dict[str, Any]) -> tuple[str, str]:
    """(the label of the owner with a request running, the other owner's label)."""
    owners = answer["queue_owners"]
    running = [owner["owner"] for owner in owners if owner["running"]]
    others = [owner["owner"] for owner in owners if not owner["running"]]
    assert len(running) == 1 and len(others) == 1, owners
    return running[0], others[0]


# -- with the scripted engine: the refusal's shape in every dialect, the line, the launcher ----


def test_an_owners_full_share_is_a_503_in_every_dialect_and_the_line_is_shown(
    serve_engine: Serve, qtbot: QtBot
) -> None:
    """--multiuserperkey 2: key A runs one request and queues one; its third is refused in
    every dialect (x-api-key is the same key as a Bearer), while key B still gets in, ahead
    of A's waiting one. Perf and the launcher's queue table show the line by owner label."""
    engine = ScriptedEngine(token_seconds=0.02)
    server = serve_engine(engine, HearthSettings(multiuser=10, multiuserperkey=2))
    url = server.base_url
    body = {"prompt": "x", "max_length": 2}
    with (
        httpx.Client(base_url=url, timeout=30) as client,
        client.stream(
            "POST",
            "/api/extra/generate/stream",
            json={"prompt": "x", "max_length": 2000},
            headers=bearer("key-A"),
        ) as running,
        ThreadPoolExecutor(2) as pool,
    ):
        lines = running.iter_lines()  # kept: dropping the iterator would close the stream
        next(lines)
        waiting_a = pool.submit(httpx.post, f"{url}/api/v1/generate", json=body, **_as("key-A"))
        until(lambda: perf(server)["queue"] == 1, "A's second request to wait")
        waiting_b = pool.submit(httpx.post, f"{url}/api/v1/generate", json=body, **_as("key-B"))
        until(lambda: perf(server)["queue"] == 2, "B's request to wait")
        answer = perf(server)
        owner_a, owner_b = labels_by_running(answer)
        assert answer["queue_line"] == [owner_b, owner_a]  # B's turn before A's second
        assert answer["queue_owners"] == [
            {"owner": owner_b, "waiting": 1, "running": 0},
            {"owner": owner_a, "waiting": 1, "running": 1},
        ]
        assert all(len(label) == 8 and "key" not in label for label in (owner_a, owner_b))
        _refused_in_every_dialect(client)
        view = RunView()
        qtbot.addWidget(view)
        view.show_perf(answer)
        assert view.queue.rows() == [("1", owner_b), ("2", owner_a)]
        assert view.waiting.text() == "2"
        client.post("/api/extra/abort", json={})  # the running one (no genkey) ends
        assert waiting_a.result().status_code == 200 and waiting_b.result().status_code == 200
    assert [r.prompt for r in engine.requests] == ["x"] * 3
    view.show_perf(perf(server))
    assert view.queue.rows() == []


def _as(key: str) -> dict[str, Any]:
    return {"headers": bearer(key), "timeout": 30}


def _refused_in_every_dialect(client: httpx.Client) -> None:
    for path, body, headers in [
        ("/api/v1/generate", {"prompt": "x", "max_length": 2}, bearer("key-A")),
        ("/v1/chat/completions", {"messages": USER}, bearer("key-A")),
        ("/v1/messages", {"messages": USER, "max_tokens": 5}, {"x-api-key": "key-A"}),
        ("/api/chat", {"model": "m", "messages": USER}, bearer("key-A")),
    ]:
        refused = client.post(path, json=body, headers=headers)
        assert refused.status_code == 503, path
        detail = refused.json()["detail"]
        assert detail["type"] == "service_unavailable", path
        assert detail["msg"].startswith("Your share of the queue is full: 2 requests"), path


# -- on the real model: one server for the module -----------------------------------------


@pytest.fixture(scope="module")
def fair_server(start_hearth: Callable[[Sequence[str]], RunningServer]) -> RunningServer:
    return start_hearth(["--multiuser", "8", "--multiuserperkey", "7"])


class Line:
    """Requests put in line one at a time while key A's long first request runs, each known
    to wait (perf counts it) before the next is sent, so the arrival order is exact."""

    def __init__(self, server: RunningServer, client: httpx.AsyncClient) -> None:
        self.server = server
        self.client = client
        self.tasks: list[asyncio.Task[httpx.Response]] = []

    async def join(self, key: str, tokens: int = 1) -> None:
        body = {"prompt": f"Request {len(self.tasks)} of {key}:", "max_tokens": tokens}
        post = self.client.post("/v1/completions", json=body, headers=bearer(key))
        self.tasks.append(asyncio.create_task(post))
        count = len(self.tasks)
        await asyncio.to_thread(
            until, lambda: perf(self.server)["queue"] == count, f"request {count} to wait"
        )

    async def ids(self) -> list[str]:
        """Each request's id once it has been answered, in the order they joined."""
        answers = await asyncio.gather(*self.tasks)
        assert [answer.status_code for answer in answers] == [200] * len(answers)
        return [str(answer.json()["id"]) for answer in answers]


class LongRequest:
    """A key's first request: streamed, never ending by itself (its end token is ignored),
    until `leave` closes it (the server then cancels it, as for any client that leaves)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        # Kept: an abandoned line iterator would be finalized, closing the stream early.
        self.lines = response.aiter_lines()

    @classmethod
    async def running(cls, client: httpx.AsyncClient, key: str) -> LongRequest:
        body = {"prompt": "Once upon a time", "n_predict": 4000, "ignore_eos": True, "stream": True}
        request = client.build_request("POST", "/completion", json=body, headers=bearer(key))
        long = cls(await client.send(request, stream=True))
        async for line in long.lines:
            if line.startswith("data: "):  # its first token: it runs
                return long
        raise AssertionError("the long request ended without a token")

    async def leave(self) -> None:
        await self.response.aclose()


def served_order(server: RunningServer, ids: list[str], after: int) -> list[str]:
    """The requests in the order the server logged them finished: every line naming a
    request ("[id] prompt … tokens, generated …") is written when it ends, one at a time."""
    for request_id in ids:
        server.wait_for_output(f"[{request_id}]", timeout=120, after=after)
    lines = server.output[after:]
    position = {
        request_id: next(i for i, line in enumerate(lines) if f"[{request_id}]" in line)
        for request_id in ids
    }
    return sorted(ids, key=position.__getitem__)


def test_a_second_key_is_served_second_not_seventh(fair_server: RunningServer) -> None:
    """Key A runs a request and queues six more, then key B queues one: B's starts as soon as
    A's first ends, before A's other six, which keep their own arrival order."""
    start = len(fair_server.output)

    async def scenario() -> tuple[list[str], dict[str, Any]]:
        async with httpx.AsyncClient(base_url=fair_server.base_url, timeout=120) as client:
            first = await LongRequest.running(client, "fair-A")
            line = Line(fair_server, client)
            for _ in range(6):
                await line.join("fair-A")
            await line.join("fair-B")
            answer = await asyncio.to_thread(perf, fair_server)
            await first.leave()  # A's first request ends: its client left
            return await line.ids(), answer

    ids, answer = asyncio.run(scenario())
    a_ids, b_id = ids[:6], ids[6]
    assert served_order(fair_server, ids, start) == [b_id, *a_ids]
    owner_a, owner_b = labels_by_running(answer)  # and perf showed that line beforehand
    assert answer["queue"] == 7 and answer["queue_line"] == [owner_b] + [owner_a] * 6


def test_one_key_alone_is_served_in_arrival_order(fair_server: RunningServer) -> None:
    start = len(fair_server.output)

    async def scenario() -> list[str]:
        async with httpx.AsyncClient(base_url=fair_server.base_url, timeout=120) as client:
            first = await LongRequest.running(client, "alone-A")
            line = Line(fair_server, client)
            for _ in range(3):
                await line.join("alone-A")
            await first.leave()
            return await line.ids()

    ids = asyncio.run(scenario())
    assert served_order(fair_server, ids, start) == ids


def test_multiuser_keeps_its_exact_count_and_a_key_its_share(fair_server: RunningServer) -> None:
    """--multiuser 8: eight in flight, the ninth refused with KoboldCpp's busy body, whoever
    asks. --multiuserperkey 7: key A's eighth is refused as its share, while B still gets in."""

    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(base_url=fair_server.base_url, timeout=120) as client:
            first = await LongRequest.running(client, "count-A")
            line = Line(fair_server, client)
            for _ in range(6):
                await line.join("count-A")
            over_share = await client.post(
                "/v1/completions", json={"prompt": "8", "max_tokens": 1}, headers=bearer("count-A")
            )
            await line.join("count-B")  # the eighth in flight: still admitted
            over_all = await client.post(
                "/v1/completions", json={"prompt": "9", "max_tokens": 1}, headers=bearer("count-C")
            )
            await first.leave()
            await line.ids()
            return over_share, over_all

    over_share, over_all = asyncio.run(scenario())
    assert over_share.status_code == 503
    assert over_share.json()["detail"]["msg"].startswith("Your share of the queue is full: 7 ")
    assert over_all.status_code == 503
    assert over_all.json() == {"detail": {"msg": BUSY, "type": "service_unavailable"}}
