"""Resumable streams over real HTTP with a scripted engine, on every SSE dialect: every event
has an `id:`, a cut connection is resumed with `Last-Event-ID` from exactly the next event
(no loss, no duplicate), unknown and expired streams are 404s, memory stays bounded."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from server.settings.config import HearthSettings
from tests.support.error_shapes import assert_error_shape
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import SSEEvent, iter_sse

Serve = Callable[..., RunningServer]
USER = [{"role": "user", "content": "Hi"}]
PIECES = (b"Hello", b",", b" world", b"!")
TOKENS = 40
RESUMABLE_HEADER = {"X-Hearth-Resumable": "1"}


def scripted_text(tokens: int) -> str:
    return "".join(PIECES[i % len(PIECES)].decode() for i in range(tokens))


@dataclass(frozen=True)
class Dialect:
    """One SSE route: how to ask it for a resumable stream, and how to read its events."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    text: Callable[[SSEEvent], str]
    name: Callable[[SSEEvent], str | None]  # the generation's name, if this event says it


def _openai_chunk_text(event: SSEEvent) -> str:
    if event.data == "[DONE]":
        return ""
    choice = (event.json().get("choices") or [{}])[0]
    return str(choice.get("text") or (choice.get("delta") or {}).get("content") or "")


def _openai_chunk_id(event: SSEEvent) -> str | None:
    return None if event.data == "[DONE]" else event.json().get("id")


def _responses_text(event: SSEEvent) -> str:
    return str(event.json()["delta"]) if event.event == "response.output_text.delta" else ""


def _responses_id(event: SSEEvent) -> str | None:
    return event.json()["response"]["id"] if event.event == "response.created" else None


def _anthropic_text(event: SSEEvent) -> str:
    if event.event != "content_block_delta":
        return ""
    return str(event.json()["delta"].get("text", ""))


def _anthropic_id(event: SSEEvent) -> str | None:
    return event.json()["message"]["id"] if event.event == "message_start" else None


DIALECTS = {
    "kobold": Dialect(
        "/api/extra/generate/stream",
        {"prompt": "x", "max_length": TOKENS, "genkey": "KCPPresume1", "resumable": True},
        {},
        lambda event: str(event.json()["token"]),
        lambda _event: "KCPPresume1",
    ),
    "openai-chat": Dialect(
        "/v1/chat/completions",
        {
            "messages": USER,
            "max_tokens": TOKENS,
            "stream": True,
            "stream_options": {"resumable": True, "include_usage": True},
        },
        {},
        _openai_chunk_text,
        _openai_chunk_id,
    ),
    "openai-completions": Dialect(
        "/v1/completions",
        {
            "prompt": "x",
            "max_tokens": TOKENS,
            "stream": True,
            "stream_options": {"resumable": True},
        },
        {},
        _openai_chunk_text,
        _openai_chunk_id,
    ),
    "openai-responses": Dialect(
        "/v1/responses",
        {"input": "x", "max_output_tokens": TOKENS, "stream": True},
        RESUMABLE_HEADER,
        _responses_text,
        _responses_id,
    ),
    "anthropic": Dialect(
        "/v1/messages",
        {"messages": USER, "max_tokens": TOKENS, "stream": True},
        RESUMABLE_HEADER,
        _anthropic_text,
        _anthropic_id,
    ),
    "llama-completion": Dialect(
        "/completion",
        {"prompt": "x", "n_predict": TOKENS, "stream": True},
        RESUMABLE_HEADER,
        lambda event: str(event.json().get("content", "")),
        lambda _event: None,  # llama-server's chunks carry no id: the header names it
    ),
}


def perf(server: RunningServer) -> dict[str, Any]:
    return dict(httpx.get(server.base_url + "/api/extra/perf").json())


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def _events(response: httpx.Response) -> list[SSEEvent]:
    return [event for event in iter_sse(response) if event.data]


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_cut_stream_resumes_from_the_next_event(serve_engine: Serve, dialect: str) -> None:
    """Cut twice, resumed twice: the three parts are one stream, ids 0..n-1 in order, and the
    text is the whole generation (it kept running while nobody was connected)."""
    route = DIALECTS[dialect]
    server = serve_engine(ScriptedEngine(PIECES, token_seconds=0.01))
    received: list[SSEEvent] = []
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        with client.stream("POST", route.path, json=route.body, headers=route.headers) as first:
            assert first.status_code == 200, first.read()
            name = first.headers["x-hearth-stream-id"]
            for event in iter_sse(first):
                if event.data:
                    received.append(event)
                if len(received) == 4:
                    break  # leaving the block closes the connection mid-stream
        named = [n for n in map(route.name, received) if n is not None]
        assert all(n == name for n in named)  # the events name the stream as the header does
        with client.stream(
            "GET", f"/api/extra/stream/{name}", headers={"Last-Event-ID": received[-1].id or ""}
        ) as second:
            assert second.status_code == 200
            assert second.headers["content-type"].startswith("text/event-stream")
            for event in iter_sse(second):
                if event.data:
                    received.append(event)
                if len(received) == 9:
                    break
        with client.stream(
            "GET", f"/api/extra/stream/{name}", headers={"Last-Event-ID": received[-1].id or ""}
        ) as third:
            received += _events(third)
    assert [event.id for event in received] == [str(i) for i in range(len(received))]
    assert "".join(map(route.text, received)) == scripted_text(TOKENS)
    # And the same stream from its start, to a late reader with no Last-Event-ID.
    with httpx.stream("GET", f"{server.base_url}/api/extra/stream/{name}") as again:
        replayed = _events(again)
    assert [(e.id, e.event, e.data) for e in replayed] == [
        (e.id, e.event, e.data) for e in received
    ]


def test_plain_streams_number_their_events_too(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(PIECES))
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        for dialect in DIALECTS.values():
            body = {k: v for k, v in dialect.body.items() if k not in ("resumable",)}
            body.pop("stream_options", None)
            with client.stream("POST", dialect.path, json=body) as response:
                assert "x-hearth-stream-id" not in response.headers
                events = _events(response)
            assert [e.id for e in events] == [str(i) for i in range(len(events))], dialect.path
    assert perf(server)["resumable_streams"] == 0  # not asked for: nothing kept


def test_without_the_opt_in_a_cut_stops_the_generation(serve_engine: Serve) -> None:
    engine = ScriptedEngine(PIECES, token_seconds=0.01)
    server = serve_engine(engine)
    body = {"messages": USER, "max_tokens": 2000, "stream": True}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            first = next(e for e in iter_sse(response) if e.data and _openai_chunk_text(e))
            name = first.json()["id"]
        wait_for(lambda: perf(server)["idle"] == 1, "the generation stopped with its client")
        missing = client.get(f"/api/extra/stream/{name}")
    assert missing.status_code == 404
    assert_error_shape("/api/v1/generate", missing.json())


def test_unknown_stream_and_bad_last_event_id(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(PIECES), HearthSettings(password="pw"))
    auth = {"Authorization": "Bearer pw"}
    route = DIALECTS["openai-chat"]
    with httpx.Client(base_url=server.base_url, timeout=30, headers=auth) as client:
        unknown = client.get("/api/extra/stream/chatcmpl-nosuchthing")
        assert unknown.status_code == 404 and "no resumable stream" in unknown.text
        assert_error_shape("/api/v1/generate", unknown.json())
        with client.stream("POST", route.path, json=route.body) as response:
            name = response.headers["x-hearth-stream-id"]
            _events(response)
        assert httpx.get(f"{server.base_url}/api/extra/stream/{name}").status_code == 401
        for bad in ("abc", "-1", "99999", "²", "9" * 5000):
            refused = client.get(
                f"/api/extra/stream/{name}", headers={"Last-Event-ID": bad.encode("latin-1")}
            )
            assert refused.status_code == 400, bad
            assert "Last-Event-ID" in refused.json()["error"]["message"]  # the stream's dialect


def test_a_genkey_naming_a_running_resumable_stream_is_refused(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(PIECES, token_seconds=0.01), HearthSettings(multiuser=4))
    body = {"prompt": "x", "max_length": 2000, "genkey": "KCPPsame", "resumable": True}
    with (
        httpx.Client(base_url=server.base_url, timeout=30) as client,
        client.stream("POST", "/api/extra/generate/stream", json=body) as first,
    ):
        events = iter_sse(first)
        next(e for e in events if e.data)
        again = client.post("/api/extra/generate/stream", json=body)
        assert again.status_code == 400 and "KCPPsame" in again.text
        client.post("/api/extra/abort", json={"genkey": "KCPPsame"})
        finals = [e.json() for e in events if e.data]
    assert finals[-1]["finish_reason"] == "abort"
    # Finished, it no longer blocks its genkey: a new stream of that name replaces it.
    body["max_length"] = 3
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        with client.stream("POST", "/api/extra/generate/stream", json=body) as replaced:
            tokens = [e.json()["token"] for e in _events(replaced)]
        resumed_text = client.get("/api/extra/stream/KCPPsame").text
        resumed = [e.json()["token"] for e in _events_of(resumed_text)]
    assert "".join(tokens) == "".join(resumed) == scripted_text(3)


def _events_of(text: str) -> list[SSEEvent]:
    response = httpx.Response(200, text=text)
    return list(iter_sse(response))


def test_abandoned_streams_are_aborted_after_the_grace_and_memory_returns(
    serve_engine: Serve,
) -> None:
    """Many resumable streams left behind: each generation runs on for the grace period, then
    is aborted, and the server keeps nothing of them."""
    engine = ScriptedEngine(PIECES, token_seconds=0.01)
    server = serve_engine(engine, HearthSettings(resumegrace=1, multiuser=40, parallelrequests=4))
    count = 24
    body = {"messages": USER, "max_tokens": 100_000, "stream": True}
    names = []
    with httpx.Client(base_url=server.base_url, timeout=30, headers=RESUMABLE_HEADER) as client:
        for _ in range(count):
            with client.stream("POST", "/v1/chat/completions", json=body) as response:
                names.append(response.headers["x-hearth-stream-id"])
                # Left at once: the first ones are generating, the rest waiting in line.
    seen = perf(server)
    assert seen["resumable_streams"] == count  # all kept for now, none aborted yet
    wait_for(lambda: perf(server)["resumable_streams"] == 0, "every stream forgotten")
    wait_for(lambda: perf(server)["idle"] == 1 and perf(server)["queue"] == 0, "all aborted")
    after = perf(server)
    assert after["resumable_bytes"] == 0
    assert len(engine.requests) <= count
    for name in names[:3]:
        assert httpx.get(f"{server.base_url}/api/extra/stream/{name}").status_code == 404


def test_a_stream_resumed_within_the_grace_keeps_generating(serve_engine: Serve) -> None:
    """The grace runs from the last reader leaving; a reader back in time cancels it."""
    server = serve_engine(ScriptedEngine(PIECES, token_seconds=0.01), HearthSettings(resumegrace=1))
    route = DIALECTS["kobold"]
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        with client.stream("POST", route.path, json={**route.body, "max_length": 150}) as first:
            last = next(e for e in iter_sse(first) if e.data)
        with client.stream(
            "GET", "/api/extra/stream/KCPPresume1", headers={"Last-Event-ID": last.id or ""}
        ) as resumed:
            rest = _events(resumed)
    # 150 tokens at 10 ms take longer than the 1 s grace: resumed, it was never aborted.
    assert rest[-1].json()["finish_reason"] == "length"
    tokens = [last.json()["token"]] + [e.json()["token"] for e in rest]
    assert "".join(tokens) == scripted_text(150)


def test_a_stream_whose_retention_fills_is_aborted_with_its_ending(serve_engine: Serve) -> None:
    limit = 4000
    # At a few ms a token (still far faster than a model), as few events are in flight as
    # with a real model when the stop is asked for.
    engine = ScriptedEngine(PIECES, token_seconds=0.002)
    server = serve_engine(engine, resumable_stream_bytes=limit)
    body = {"prompt": "x", "max_length": 100_000, "resumable": True}
    with httpx.stream(
        "POST", f"{server.base_url}/api/extra/generate/stream", json=body
    ) as response:
        raw = b"".join(response.iter_bytes())
    events = _events_of(raw.decode())
    assert events[-1].json()["finish_reason"] == "abort"  # KoboldAI's word for cancelled
    assert limit < len(raw) < 2 * limit  # stopped at the bound, plus what was in flight
    wait_for(lambda: perf(server)["idle"] == 1, "the generation stopped")


def test_followers_read_at_their_own_pace(serve_engine: Serve) -> None:
    """Two readers of one stream at once (a second tab resuming it) each get all of it."""
    server = serve_engine(ScriptedEngine(PIECES, token_seconds=0.005))
    route = DIALECTS["openai-completions"]
    results: dict[str, str] = {}
    with httpx.stream("POST", f"{server.base_url}{route.path}", json=route.body) as first:
        name = first.headers["x-hearth-stream-id"]

        def second_reader() -> None:
            with httpx.stream("GET", f"{server.base_url}/api/extra/stream/{name}") as other:
                results["second"] = "".join(map(_openai_chunk_text, _events(other)))

        reader = threading.Thread(target=second_reader)
        reader.start()
        results["first"] = "".join(map(_openai_chunk_text, _events(first)))
        reader.join(30)
    assert results == {"first": scripted_text(TOKENS), "second": scripted_text(TOKENS)}


def test_any_genkey_names_a_stream(serve_engine: Serve) -> None:
    """A genkey is any string, but a header value and a URL segment are not: then the header
    names the stream by a URL-safe name of its own (the fuzzer found the 500 this was)."""
    server = serve_engine(ScriptedEngine(PIECES))
    genkey = "é/ü x\n😀"
    body = {"prompt": "x", "max_length": 6, "genkey": genkey, "resumable": True}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        with client.stream("POST", "/api/extra/generate/stream", json=body) as response:
            assert response.status_code == 200
            name = response.headers["x-hearth-stream-id"]
            first = [e.json()["token"] for e in _events(response)]
        assert name.startswith("kai-stream-")
        again = client.get(f"/api/extra/stream/{name}")
        assert again.status_code == 200, again.text
    assert [e.json()["token"] for e in _events_of(again.text)] == first


def test_the_resume_route_is_documented(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(PIECES))
    schema = httpx.get(server.base_url + "/openapi.json").json()
    operation = schema["paths"]["/api/extra/stream/{name}"]["get"]
    assert any(p["name"] == "last-event-id" for p in operation["parameters"])
    assert json.dumps(operation).count("text/event-stream")
