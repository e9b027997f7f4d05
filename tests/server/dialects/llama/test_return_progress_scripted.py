"""llama-server's `return_progress` over real HTTP with a scripted engine that reads its prompt
in chunks (exact counts, no model time): the shapes on /completion, /v1/completions and chat,
the official openai client reading such a stream, several choices, resumable streams, and
nothing changed for a request that does not ask (the real model: test_return_progress_real.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai

from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import SSEEvent, iter_sse

Serve = Callable[..., RunningServer]
PROMPT = "0123456789"  # ten scripted tokens (one per byte), read three at a time
USER: list[Any] = [{"role": "user", "content": "Hi"}]


def chunked(serve_engine: Serve) -> tuple[RunningServer, ScriptedEngine]:
    engine = ScriptedEngine(pieces=[b"ok"], prompt_chunk=3)
    return serve_engine(engine), engine


def stream(
    server: RunningServer, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> list[SSEEvent]:
    with httpx.stream(
        "POST", server.base_url + path, json=body, headers=headers, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        return [event for event in iter_sse(response) if event.data]


def chunks(events: list[SSEEvent]) -> list[dict[str, Any]]:
    return [event.json() for event in events if event.data != "[DONE]"]


def progress_of(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [chunk["prompt_progress"] for chunk in received if "prompt_progress" in chunk]


def assert_reads_the_prompt(progress: list[dict[str, Any]], total: int) -> None:
    """llama-server's rules: the first report says what came from the cache (nothing here),
    then one per decode, `processed` rising to `total`; `time_ms` a whole count, never less."""
    assert [p["processed"] for p in progress] == [*range(0, total, 3), total]
    assert all(p["total"] == total and p["cache"] == 0 for p in progress)
    times = [p["time_ms"] for p in progress]
    assert all(isinstance(t, int) for t in times) and times == sorted(times)


def test_native_completion_reports_the_prompt_before_the_text(serve_engine: Serve) -> None:
    server, engine = chunked(serve_engine)
    body = {"prompt": PROMPT, "n_predict": 2, "stream": True, "return_progress": True}
    received = chunks(stream(server, "/completion", body))
    assert engine.requests[-1].report_progress
    assert_reads_the_prompt(progress_of(received), len(PROMPT))
    reports = [chunk for chunk in received if "prompt_progress" in chunk]
    assert received[: len(reports)] == reports  # all of them before any text
    for chunk in reports:  # the usual partial chunk, without text
        assert chunk["content"] == "" and chunk["tokens"] == [] and chunk["stop"] is False
    assert "".join(chunk["content"] for chunk in received) == "okok"
    assert received[-1]["stop"] is True and "prompt_progress" not in received[-1]


def test_without_asking_the_streams_are_as_before(serve_engine: Serve) -> None:
    """The same requests without `return_progress` (or with it false): no report, and chunk
    for chunk the shapes of the stream that asked, its reports taken out."""
    server, engine = chunked(serve_engine)
    routes: dict[str, dict[str, Any]] = {
        "/completion": {"prompt": PROMPT, "n_predict": 2, "stream": True},
        "/v1/completions": {"prompt": PROMPT, "max_tokens": 2, "stream": True},
        "/v1/chat/completions": {"messages": USER, "max_tokens": 2, "stream": True},
    }
    for path, body in routes.items():
        asked = chunks(stream(server, path, {**body, "return_progress": True}))
        for plain_body in (body, {**body, "return_progress": False}):
            plain = chunks(stream(server, path, plain_body))
            assert not engine.requests[-1].report_progress
            assert not progress_of(plain), path
            kept = [chunk for chunk in asked if "prompt_progress" not in chunk]
            assert [sorted(chunk) for chunk in plain] == [sorted(chunk) for chunk in kept], path


def test_a_whole_answer_ignores_it(serve_engine: Serve) -> None:
    server, engine = chunked(serve_engine)
    for path, body in {
        "/completion": {"prompt": PROMPT, "n_predict": 2},
        "/v1/chat/completions": {"messages": USER, "max_tokens": 2},
        "/v1/completions": {"prompt": PROMPT, "max_tokens": 2},
    }.items():
        answer = httpx.post(server.base_url + path, json={**body, "return_progress": True})
        assert answer.status_code == 200 and "prompt_progress" not in answer.json(), path
        assert not engine.requests[-1].report_progress  # never asked of the engine


def test_chat_reports_in_empty_role_chunks_the_openai_client_reads(serve_engine: Serve) -> None:
    server, engine = chunked(serve_engine)
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    text, reports = "", []
    for chunk in client.chat.completions.create(
        model="m", messages=USER, max_tokens=2, stream=True, extra_body={"return_progress": True}
    ):
        progress = (chunk.model_extra or {}).get("prompt_progress")
        if progress is not None:
            assert chunk.object == "chat.completion.chunk"
            assert chunk.choices[0].delta.role == "assistant"
            assert chunk.choices[0].delta.content is None
            reports.append(progress)
        elif chunk.choices:
            text += chunk.choices[0].delta.content or ""
    assert text == "okok"
    prompt = engine.count_prompt_tokens(engine.requests[-1])
    assert_reads_the_prompt(reports, prompt)
    # The raw chunk: the figures beside the choices, llama-server's shape.
    body = {"messages": USER, "max_tokens": 2, "stream": True, "return_progress": True}
    first = chunks(stream(server, "/chat/completions", body))[1]
    assert first["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": None}, "logprobs": None,
         "finish_reason": None}
    ]  # fmt: skip
    assert first["prompt_progress"] == {"total": prompt, "cache": 0, "processed": 0} | {
        "time_ms": first["prompt_progress"]["time_ms"]
    }


def test_legacy_completions_report_in_empty_text_chunks(serve_engine: Serve) -> None:
    server, _engine = chunked(serve_engine)
    body = {"prompt": PROMPT, "max_tokens": 2, "stream": True, "return_progress": True}
    received = chunks(stream(server, "/v1/completions", body))
    assert_reads_the_prompt(progress_of(received), len(PROMPT))
    for chunk in received:
        if "prompt_progress" in chunk:
            assert chunk["object"] == "text_completion"
            assert chunk["choices"][0]["text"] == ""
            assert chunk["choices"][0]["finish_reason"] is None
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    streamed = client.completions.create(
        model="m", prompt=PROMPT, max_tokens=2, stream=True, extra_body={"return_progress": True}
    )
    assert "".join(chunk.choices[0].text for chunk in streamed if chunk.choices) == "okok"


def test_each_choice_reports_its_own_prompt(serve_engine: Serve) -> None:
    server, engine = chunked(serve_engine)
    body = {"messages": USER, "max_tokens": 2, "stream": True, "n": 2, "return_progress": True}
    received = chunks(stream(server, "/v1/chat/completions", body))
    prompt = engine.count_prompt_tokens(engine.requests[-1])
    for index in (0, 1):
        mine = [c for c in received if c["choices"] and c["choices"][0]["index"] == index]
        assert_reads_the_prompt(progress_of(mine), prompt)


def test_a_resumable_stream_keeps_its_reports(serve_engine: Serve) -> None:
    server, _engine = chunked(serve_engine)
    body = {"prompt": PROMPT, "n_predict": 2, "stream": True, "return_progress": True}
    with httpx.stream(
        "POST", server.base_url + "/completion", json=body, headers={"X-Hearth-Resumable": "1"}
    ) as response:
        name = response.headers["x-hearth-stream-id"]
        first = [event for event in iter_sse(response) if event.data]
    assert_reads_the_prompt(progress_of(chunks(first)), len(PROMPT))
    with httpx.stream("GET", f"{server.base_url}/api/extra/stream/{name}") as again:
        replayed = [event for event in iter_sse(again) if event.data]
    assert [(e.id, e.data) for e in replayed] == [(e.id, e.data) for e in first]
