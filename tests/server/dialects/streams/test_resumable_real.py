"""Resumable streams on the real bundled model over real HTTP: a chat reply cut mid-stream is
fetched again with Last-Event-ID and ends exactly as one uninterrupted stream would (every
event once, in order), with the generation having run on while nobody was connected."""

from __future__ import annotations

import httpx
import openai

from tests.support.servers import RunningServer
from tests.support.sse import SSEEvent, iter_sse


def _content(event: SSEEvent) -> str:
    if event.data == "[DONE]":
        return ""
    choices = event.json().get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "")


def test_a_cut_chat_stream_resumes_on_the_real_model(hearth: RunningServer) -> None:
    body = {
        "messages": [{"role": "user", "content": "Tell me about a lighthouse."}],
        "max_tokens": 60,
        "temperature": 0,
        "stream": True,
        "stream_options": {"resumable": True, "include_usage": True},
    }
    with httpx.Client(base_url=hearth.base_url, timeout=120) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as first:
            events = iter_sse(first)
            received = [e for e in (next(events) for _ in range(4)) if e.data]
        name = received[0].json()["id"]
        # Cut: the reply keeps being generated meanwhile (for up to the grace period).
        with client.stream(
            "GET", f"/api/extra/stream/{name}", headers={"Last-Event-ID": received[-1].id or ""}
        ) as resumed:
            received += [e for e in iter_sse(resumed) if e.data]
    assert [e.id for e in received] == [str(i) for i in range(len(received))]
    assert received[-1].data == "[DONE]"
    usage = received[-2].json()["usage"]
    finish = [e.json()["choices"][0]["finish_reason"] for e in received[1:-2]]
    assert finish[-1] in ("stop", "length") and usage["completion_tokens"] > 3
    assert "".join(map(_content, received)).strip()


def test_the_openai_client_streams_a_resumable_reply(hearth: RunningServer) -> None:
    """The opt-in is invisible to a client that never drops: the official client reads it."""
    client = openai.OpenAI(base_url=hearth.base_url + "/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="hearth",
        messages=[{"role": "user", "content": "Hello"}],
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True, "resumable": True},  # type: ignore[typeddict-unknown-key]
    )
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    again = httpx.get(f"{hearth.base_url}/api/extra/stream/{chunks[0].id}", timeout=60)
    assert again.status_code == 200  # kept for the grace period after it finished
    replayed = list(iter_sse(httpx.Response(200, text=again.text)))
    assert "".join(map(_content, replayed)) == text
