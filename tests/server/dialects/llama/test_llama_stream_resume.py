"""llama-server's stream resume over real HTTP: a streamed request with `X-Conversation-Id` is
kept, `GET /v1/stream?conv_id=…&from=N` replays it from byte N and follows it live,
`DELETE /v1/stream?conv_id=…` stops its generation, `POST /v1/streams/lookup` tells its state.
The protocol on a scripted engine; one case on the real model."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from server.core.types import EngineReport, GenerationRequest
from server.settings.config import HearthSettings
from tests.support.error_shapes import assert_error_shape
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import SSEEvent, iter_sse

Serve = Callable[..., RunningServer]
PIECES = (b"Hello", b",", b" world", b"!")
# A conversation id as llama-server's web UI writes one in router mode: slashes and colons.
CONVERSATION = "conv-7f3a::ggml-org/tinygemma3-GGUF:Q8_0"
QUERY = {"conv_id": CONVERSATION}


def chat(tokens: int, **extra: Any) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": tokens,
        "stream": True,
        **extra,
    }


def scripted_text(tokens: int) -> str:
    return "".join(PIECES[i % len(PIECES)].decode() for i in range(tokens))


def events_of(raw: bytes) -> list[SSEEvent]:
    return [event for event in iter_sse(httpx.Response(200, content=raw)) if event.data]


def content_of(raw: bytes) -> str:
    text = ""
    for event in events_of(raw):
        if event.data != "[DONE]":
            for choice in event.json()["choices"]:
                text += (choice.get("delta") or {}).get("content") or ""
    return text


class CancelWatchingEngine(ScriptedEngine):
    """A scripted engine that keeps each generation's cancel flag, so a test sees the engine
    itself told to stop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cancel_flags: list[threading.Event] = []
        self.started = threading.Event()

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        self.cancel_flags.append(cancelled)
        self.started.set()
        yield from super().generate(request, cancelled)


def lookup(client: httpx.Client, *ids: object) -> list[dict[str, Any]]:
    answer = client.post("/v1/streams/lookup", json={"conversation_ids": list(ids)})
    assert answer.status_code == 200, answer.text
    return list(answer.json())


def test_a_cut_stream_replays_from_a_byte_offset_and_follows_live(serve_engine: Serve) -> None:
    """Cut after a few writes at whatever byte they ended: the rest from that offset, read while
    the generation still runs, makes exactly the bytes a reader from byte 0 gets."""
    server = serve_engine(ScriptedEngine(PIECES, token_seconds=0.01))
    headers = {"X-Conversation-Id": CONVERSATION}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        with client.stream("POST", "/v1/chat/completions", json=chat(60), headers=headers) as cut:
            assert cut.status_code == 200
            assert cut.headers["content-type"].startswith("text/event-stream")
            received = b""
            for chunk in cut.iter_raw():
                received += chunk
                if received.count(b"\n\n") >= 3:
                    break
        (running,) = lookup(client, "conv-7f3a")  # found by its id before `::model`
        assert running["conversation_id"] == CONVERSATION
        assert running["is_done"] is False and running["completed_at"] == 0
        assert running["total_bytes"] >= len(received)
        with client.stream("GET", "/v1/stream", params={**QUERY, "from": len(received)}) as rest:
            assert rest.status_code == 200
            assert rest.headers["content-type"].startswith("text/event-stream")
            resumed = rest.read()
        whole = client.get("/v1/stream", params=QUERY)  # no `from`: from byte 0
        (done,) = lookup(client, CONVERSATION, "conv-other")
    assert received + resumed == whole.content
    assert content_of(whole.content) == scripted_text(60)
    assert events_of(whole.content)[-1].data == "[DONE]"
    assert done["is_done"] is True and done["total_bytes"] == len(whole.content)
    assert done["completed_at"] >= done["started_at"] > 0


def test_an_offset_at_or_past_the_end_of_a_finished_stream_is_empty(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(PIECES))
    headers = {"X-Conversation-Id": CONVERSATION}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        sent = client.post("/v1/chat/completions", json=chat(5), headers=headers).content
        for offset in (len(sent), len(sent) + 1000):
            past = client.get("/v1/stream", params={**QUERY, "from": offset})
            assert (past.status_code, past.content) == (200, b"")
        tail = client.get("/v1/stream", params={**QUERY, "from": len(sent) - 7})
    assert tail.content == sent[-7:] == b"[DONE]\n\n"[-7:]


def test_stop_cancels_the_generation_and_forgets_the_stream(serve_engine: Serve) -> None:
    engine = CancelWatchingEngine(PIECES, token_seconds=0.01)
    server = serve_engine(engine)
    headers = {"X-Conversation-Id": CONVERSATION}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        body = chat(100_000)
        with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as live:
            events = iter_sse(live)
            next(event for event in events if event.data)
            stopped = client.delete("/v1/stream", params=QUERY)
            assert (stopped.status_code, stopped.content) == (204, b"")
            assert engine.cancel_flags[0].wait(30), "the engine was never told to stop"
            rest = [event.data for event in events if event.data]  # the stream just ends
        assert "[DONE]" not in rest
        gone = client.get("/v1/stream", params=QUERY)
        assert gone.status_code == 404 and "Stream not found" in gone.text
        assert lookup(client, CONVERSATION) == []
        again = client.delete("/v1/stream", params=QUERY)  # idempotent, as llama-server's
        assert (again.status_code, again.content) == (204, b"")


def test_a_new_request_of_a_conversation_replaces_its_running_stream(serve_engine: Serve) -> None:
    engine = CancelWatchingEngine(PIECES, token_seconds=0.01)
    server = serve_engine(engine, HearthSettings(multiuser=2, parallelrequests=2))
    headers = {"X-Conversation-Id": CONVERSATION}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        with client.stream(
            "POST", "/v1/chat/completions", json=chat(100_000), headers=headers
        ) as first:
            next(event for event in iter_sse(first) if event.data)
            second = client.post("/v1/chat/completions", json=chat(3), headers=headers)
            assert engine.cancel_flags[0].wait(30), "the old generation still runs"
        replay = client.get("/v1/stream", params=QUERY)
    assert replay.content == second.content
    assert content_of(replay.content) == scripted_text(3)


def test_keep_alives_are_part_of_the_bytes_every_reader_gets(serve_engine: Serve) -> None:
    """A slow prompt: keep-alive comments while it is read. They are kept with the stream,
    so that a byte offset counted by the first reader means the same in a replay."""
    keepalive = 0.02
    # The whole prompt in one read, five keep-alive periods long.
    engine = ScriptedEngine(PIECES, prompt_chunk=100_000, prompt_seconds=keepalive * 5)
    server = serve_engine(engine, keepalive_seconds=keepalive)
    headers = {"X-Conversation-Id": CONVERSATION}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        sent = client.post("/v1/chat/completions", json=chat(3), headers=headers).content
        replay = client.get("/v1/stream", params={**QUERY, "from": 0}).content
    assert b": keep-alive\n" in sent
    assert replay == sent and content_of(replay) == scripted_text(3)


def test_hearth_resume_still_works_on_a_conversation_stream(serve_engine: Serve) -> None:
    """The conversation's stream is a Hearth resumable stream too: its name and Last-Event-ID."""
    server = serve_engine(ScriptedEngine(PIECES))
    headers = {"X-Conversation-Id": CONVERSATION}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        with client.stream("POST", "/v1/chat/completions", json=chat(4), headers=headers) as sent:
            name = sent.headers["x-hearth-stream-id"]
            events = events_of(sent.read())
        after_first = client.get(f"/api/extra/stream/{name}", headers={"Last-Event-ID": "0"})
    assert [e.data for e in events_of(after_first.content)] == [e.data for e in events[1:]]


def test_unknown_conversations_and_bad_queries(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(PIECES), HearthSettings(password="pw"))
    auth = {"Authorization": "Bearer pw"}
    with httpx.Client(base_url=server.base_url, timeout=30, headers=auth) as client:
        unknown = client.get("/v1/stream", params={"conv_id": "nobody", "from": "0"})
        assert unknown.status_code == 404
        assert unknown.json()["error"]["message"] == "Stream not found or expired"
        assert_error_shape("/v1/stream", unknown.json())
        for params in ({}, {"conv_id": ""}):
            for method in ("GET", "DELETE"):
                missing = client.request(method, "/v1/stream", params=params)
                assert missing.status_code == 400, (method, params)
                assert "Missing conversation id" in missing.json()["error"]["message"]
        stop_unknown = client.delete("/v1/stream", params={"conv_id": "nobody"})
        assert (stop_unknown.status_code, stop_unknown.content) == (204, b"")
        assert lookup(client, "nobody", 7, "") == []
        headers = {"X-Conversation-Id": CONVERSATION}
        client.post("/v1/chat/completions", json=chat(2), headers=headers)
        for bad in ("abc", "-1", "1.5", "9" * 40):
            refused = client.get("/v1/stream", params={**QUERY, "from": bad})
            assert refused.status_code == 400 and "from" in refused.text, bad
    for method, path in (("GET", "/v1/stream"), ("DELETE", "/v1/stream")):
        assert httpx.request(method, server.base_url + path, params=QUERY).status_code == 401
    no_key = httpx.post(server.base_url + "/v1/streams/lookup", json={"conversation_ids": []})
    assert no_key.status_code == 401


def test_a_conversation_stream_on_the_real_model(hearth: RunningServer) -> None:
    """The bundled model's reply, cut after its first writes: the replay from the cut's byte
    offset completes it, the whole replay is byte for byte what was sent, and Stop forgets it."""
    conversation = "real-conv-1"
    body = {**chat(40), "temperature": 0}
    headers = {"X-Conversation-Id": conversation}
    query = {"conv_id": conversation}
    with httpx.Client(base_url=hearth.base_url, timeout=120) as client:
        with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as cut:
            received = b""
            for chunk in cut.iter_raw():
                received += chunk
                if received.count(b"\n\n") >= 2:
                    break
        rest = client.get("/v1/stream", params={**query, "from": len(received)}).content
        whole = client.get("/v1/stream", params={**query, "from": 0}).content
        assert received + rest == whole
        assert events_of(whole)[-1].data == "[DONE]" and content_of(whole).strip()
        assert client.delete("/v1/stream", params=query).status_code == 204
        assert client.get("/v1/stream", params=query).status_code == 404
