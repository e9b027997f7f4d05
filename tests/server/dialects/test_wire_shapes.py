"""Every answer and every stream event has its dialect's typed shape (the TypedDicts in
server/dialects/*/schemas.py, which mypy checks the formatters against): plain text, a failure
mid-stream and a tool call, over real HTTP with a scripted engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from server.core.templates.chat import ChatTemplate
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.stream_shapes import answer_problem, stream_problem

Serve = Callable[..., RunningServer]
USER: list[Any] = [{"role": "user", "content": "Hi"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
TOOL_JSON = b'{"name": "get_weather", "arguments": {"city": "Oslo"}}'

# path, body, stream path (Kobold streams on its own path)
REQUESTS: list[tuple[str, dict[str, Any], str]] = [
    ("/api/v1/generate", {"prompt": "x", "max_length": 4}, "/api/extra/generate/stream"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 4}, "/v1/completions"),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": 4}, "/v1/chat/completions"),
    ("/v1/responses", {"input": "x", "max_output_tokens": 4}, "/v1/responses"),
    ("/v1/messages", {"messages": USER, "max_tokens": 4}, "/v1/messages"),
    ("/api/generate", {"model": "m", "prompt": "x"}, "/api/generate"),
    ("/api/chat", {"model": "m", "messages": USER}, "/api/chat"),
]
TOOL_PATHS = {"/v1/chat/completions", "/v1/responses", "/api/chat"}


def check_all(server: RunningServer, extra: dict[str, Any] | None = None) -> int:
    """Every endpoint whole and streamed; returns how many answers were checked."""
    checked = 0
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        for path, body, stream_path in REQUESTS:
            if extra is not None and path not in TOOL_PATHS:
                continue
            body = {**body, **(extra or {})}
            if path == "/v1/responses" and "tools" in body:  # Responses' tools are flat
                body["tools"] = [{"type": "function", **t["function"]} for t in body["tools"]]
            whole = client.post(path, json={**body, "stream": False})
            if whole.is_success:
                assert answer_problem(path, whole.text) is None, answer_problem(path, whole.text)
                checked += 1
            streamed = client.post(stream_path, json={**body, "stream": True})
            kind = streamed.headers["content-type"]
            assert streamed.is_success, streamed.text
            problem = stream_problem(stream_path, kind, streamed.text)
            assert problem is None, f"{stream_path}: {problem}"
            checked += 1
    return checked


def test_text_answers_and_streams_have_their_shapes(serve_engine: Serve) -> None:
    assert check_all(serve_engine(ScriptedEngine(pieces=[b"ok "]))) == 14


def test_failed_streams_have_their_shapes(serve_engine: Serve) -> None:
    # The whole answers are 500s here (error shapes are tests/error_shapes.py's business).
    assert check_all(serve_engine(ScriptedEngine(pieces=[b"ok "], fail_after=2))) == 7


def test_tool_call_answers_and_streams_have_their_shapes(serve_engine: Serve) -> None:
    pieces = [TOOL_JSON[i : i + 10] for i in range(0, len(TOOL_JSON), 10)]
    server = serve_engine(ScriptedEngine(pieces=pieces, end_after=len(pieces)))
    tools = {"tools": TOOLS, "tool_choice": "required"}
    assert check_all(server, tools) == 6


@pytest.mark.parametrize(
    ("data", "wrong"),
    [
        ('{"token": "a", "finish_reason": null, "extra": 1}', "fields beyond"),
        ('{"token": 5, "finish_reason": null}', "string"),
        ('{"finish_reason": null}', "Field required"),
    ],
)
def test_a_stream_event_off_its_shape_is_caught(data: str, wrong: str) -> None:
    stream = f"event: message\ndata: {data}\n\n"
    problem = stream_problem("/api/extra/generate/stream", "text/event-stream", stream)
    assert problem is not None and wrong in problem


def test_thinking_answers_and_progress_have_their_shapes(serve_engine: Serve) -> None:
    """A thought split from the answer (reasoning_content, thinking blocks, reasoning items,
    Ollama's thinking) and return_progress chunks, in every dialect's documented shape."""
    thinks = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}<think>", "llama")
    pieces = [b"I ", b"ponder", b"</think>", b"Yes", b"."]
    engine = ScriptedEngine(pieces=pieces, end_after=5, chat_template=thinks, prompt_chunk=2)
    server = serve_engine(engine)
    assert check_all(server) == 14
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        for path in ("/completion", "/v1/completions", "/v1/chat/completions"):
            body: dict[str, Any] = {"prompt": "a longer prompt", "messages": USER}
            body |= {"max_tokens": 4, "stream": True, "return_progress": True}
            streamed = client.post(path, json=body)
            assert "prompt_progress" in streamed.text, path
            problem = stream_problem(path, streamed.headers["content-type"], streamed.text)
            assert problem is None, f"{path}: {problem}"
