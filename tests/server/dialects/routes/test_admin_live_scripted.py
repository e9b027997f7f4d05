"""The launcher's live view of requests (`/api/admin/requests`, `/api/admin/abort`) over real
HTTP, with a scripted engine whose first request is held open until the test lets it end.
The real model's prompt progress and batched aborts are in
tests/server/dialects/routes/test_admin_live_real.py."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from server.core.types import (
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
)
from server.settings.config import HearthSettings
from tests.support.real_server import wait_for
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

Serve = Callable[..., RunningServer]
TOKEN = "launcher-token-for-tests"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
HELD = "hold:"  # a prompt starting so is held open before its outcome until `release`


class HeldEngine(ScriptedEngine):
    """Generates as scripted, but a prompt starting with HELD stays open (generating, all its
    tokens out) until `release` is set or it is cancelled: a request the test can watch."""

    def __init__(self) -> None:
        super().__init__(pieces=[b"a", b"b"])
        self.release = threading.Event()

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        for report in super().generate(request, cancelled):
            if isinstance(report, GenerationOutcome) and request.prompt.startswith(HELD):
                while not self.release.wait(0.01):
                    if cancelled.is_set():
                        yield GenerationOutcome(FinishReason.CANCELLED, completion_tokens=5)
                        return
            yield report


@dataclass
class Stream:
    """A streamed request read on its own thread; `first` is set once its first event is in."""

    events: list[Any] = field(default_factory=list)
    first: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


def stream(server: RunningServer, path: str, body: dict[str, Any]) -> Stream:
    read = Stream()

    def run() -> None:
        with (
            httpx.Client(base_url=server.base_url, timeout=60) as client,
            client.stream("POST", path, json=body) as response,
        ):
            for event in iter_sse(response):
                if event.data and event.data != "[DONE]":
                    read.events.append(event.json())
                    read.first.set()
        read.done.set()

    threading.Thread(target=run, daemon=True).start()
    return read


def rows(server: RunningServer) -> list[dict[str, Any]]:
    answer = httpx.get(f"{server.base_url}/api/admin/requests", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["requests"]
    return found


@pytest.fixture
def held_engine() -> Iterator[HeldEngine]:
    held = HeldEngine()
    yield held
    held.release.set()  # nothing stays held past its test


@pytest.fixture
def held(
    serve_engine: Serve, monkeypatch: pytest.MonkeyPatch, held_engine: HeldEngine
) -> RunningServer:
    """A server (one request at a time, others wait) given the launcher's token."""
    monkeypatch.setenv("HEARTH_ADMIN_TOKEN", TOKEN)
    return serve_engine(held_engine)


def test_admin_endpoints_want_the_launchers_token_or_the_admin_password(
    serve_engine: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_ADMIN_TOKEN", TOKEN)
    settings = HearthSettings(password="user-password", adminpassword="admin-password")
    server = serve_engine(ScriptedEngine(), settings)
    with server.client() as client:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "Bearer user-password"},  # API users' key: not the admin's
            {"Authorization": TOKEN},  # no scheme
            {"x-api-key": TOKEN},
        ):
            refused = client.get("/api/admin/requests", headers=headers)
            assert refused.status_code == 401, headers
            assert refused.json()["detail"]["type"] == "unauthorized"  # KoboldCpp's shape
            aborted = client.post("/api/admin/abort", headers=headers, json={"id": "kai-1"})
            assert aborted.status_code == 401
        for secret in (TOKEN, "admin-password"):
            answer = client.get(
                "/api/admin/requests", headers={"Authorization": f"Bearer {secret}"}
            )
            assert answer.status_code == 200
            assert answer.json() == {"requests": [], "tokens_per_second": 0.0, "generating": 0}


def test_without_token_or_admin_password_nobody_gets_in(
    serve_engine: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HEARTH_ADMIN_TOKEN", raising=False)
    server = serve_engine(ScriptedEngine(), HearthSettings(password="user-password"))
    with server.client() as client:
        for headers in (
            {},
            {"Authorization": "Bearer"},
            {"Authorization": "Bearer user-password"},
        ):
            assert client.get("/api/admin/requests", headers=headers).status_code == 401


def test_rows_show_running_and_waiting_requests_and_perf_shows_no_ids(held: RunningServer) -> None:
    running = stream(
        held,
        "/api/extra/generate/stream",
        {"prompt": f"{HELD} story", "max_length": 5, "genkey": "KCPP1234"},
    )
    assert running.first.wait(30)
    chat = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    stream(held, "/v1/chat/completions", chat)
    wait_for(lambda: len(rows(held)) == 2)
    first, second = rows(held)
    assert first["state"] == "generating"
    assert first["dialect"] == "kobold"
    assert first["genkey"] == "KCPP1234"
    assert first["tokens"] == 5
    assert first["prompt_done"] == first["prompt_total"] == len(f"{HELD} story")
    assert second["state"] == "waiting"
    assert second["dialect"] == "openai"
    assert second["tokens"] == 0
    for row in (first, second):
        host, _, port = row["client"].rpartition(":")
        assert host == "127.0.0.1" and port.isdigit()
    assert first["client"] != second["client"]  # two connections, two client ports
    perf = httpx.get(f"{held.base_url}/api/extra/perf").text  # anonymous, as in KoboldCpp
    assert '"queue":1' in perf.replace(" ", "")
    for private in ("KCPP1234", first["id"], second["id"], "127.0.0.1"):
        assert private not in perf


def running_and_waiting(held: RunningServer) -> tuple[Stream, Stream]:
    """A held stream generating, and one waiting behind it, both in the live rows."""
    running = stream(held, "/api/extra/generate/stream", {"prompt": f"{HELD} a", "max_length": 5})
    assert running.first.wait(30)
    waiting = stream(held, "/api/extra/generate/stream", {"prompt": "b", "max_length": 3})
    wait_for(lambda: len(rows(held)) == 2)
    return running, waiting


def test_abort_of_a_waiting_request_ends_it_alone(
    held: RunningServer, held_engine: HeldEngine
) -> None:
    running, waiting = running_and_waiting(held)
    waiting_id = rows(held)[1]["id"]
    with held.client(headers=ADMIN) as client:
        answer = client.post("/api/admin/abort", json={"id": waiting_id})
        assert answer.status_code == 200
        assert answer.json() == {"success": True, "id": waiting_id}
        assert waiting.done.wait(30)
        assert waiting.events[-1]["finish_reason"] != "length"
        assert [row["state"] for row in rows(held)] == ["generating"]  # the other runs on
        assert not running.done.is_set()
        gone = client.post("/api/admin/abort", json={"id": waiting_id})
        assert gone.status_code == 404
        assert gone.json()["detail"]["type"] == "not_found"
    held_engine.release.set()
    assert running.done.wait(30)
    assert running.events[-1]["finish_reason"] == "length"


def test_abort_of_the_running_request_lets_the_next_one_run(held: RunningServer) -> None:
    running, waiting = running_and_waiting(held)
    running_id = rows(held)[0]["id"]
    with held.client(headers=ADMIN) as client:
        assert client.post("/api/admin/abort", json={"id": running_id}).status_code == 200
    assert running.done.wait(30)
    assert running.events[-1]["finish_reason"] != "length"
    assert waiting.done.wait(30)
    assert waiting.events[-1]["finish_reason"] == "length"
    assert "".join(event["token"] for event in waiting.events) == "aba"
