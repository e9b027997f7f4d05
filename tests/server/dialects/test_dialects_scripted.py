"""Failure paths, keep-alives, auth, errors and CORS of the OpenAI, Anthropic and Ollama
dialects, over real HTTP with a scripted engine (the real-model runs are in
tests/server/dialects/test_clients_real_model.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest

from server.settings.config import HearthSettings
from tests.support.metrics_reader import scrape_until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

Serve = Callable[..., RunningServer]
TOOL_JSON = b'{"name": "get_weather", "arguments": {"city": "Oslo"}}'
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
USER: list[Any] = [{"role": "user", "content": "Hi"}]


def failing(serve_engine: Serve) -> RunningServer:
    return serve_engine(ScriptedEngine(pieces=[b"ok "], fail_after=2))


def test_openai_mid_stream_failure_raises_and_server_keeps_serving(serve_engine: Serve) -> None:
    server = failing(serve_engine)
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    received: list[str] = []
    with pytest.raises(openai.APIError, match="scripted failure"):
        for chunk in client.chat.completions.create(
            model="m", messages=USER, max_tokens=9, stream=True
        ):
            if chunk.choices:
                received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "ok ok "
    with pytest.raises(openai.APIError, match="scripted failure"):
        list(client.completions.create(model="m", prompt="x", max_tokens=9, stream=True))
    with client.responses.stream(model="m", input="x", max_output_tokens=9) as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.failed"
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=USER, max_tokens=9)
    ok = client.completions.create(model="m", prompt="x", max_tokens=2)
    assert ok.choices[0].text == "ok ok "


def test_anthropic_mid_stream_failure_raises(serve_engine: Serve) -> None:
    server = failing(serve_engine)
    client = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    with (
        pytest.raises(anthropic.APIStatusError, match="scripted failure"),
        client.messages.stream(model="m", max_tokens=9, messages=USER) as stream,
    ):
        for _ in stream:
            pass


def test_ollama_mid_stream_failure_raises(serve_engine: Serve) -> None:
    server = failing(serve_engine)
    client = ollama.Client(host=server.base_url)
    with pytest.raises(ollama.ResponseError, match="scripted failure"):
        list(client.chat(model="m", messages=USER, stream=True, options={"num_predict": 9}))
    with pytest.raises(ollama.ResponseError, match="scripted failure"):
        client.generate(model="m", prompt="x", options={"num_predict": 9})


def test_bound_tool_call_streams_keep_alive_then_the_call_as_written(serve_engine: Serve) -> None:
    pieces = [TOOL_JSON[i : i + 10] for i in range(0, len(TOOL_JSON), 10)]
    server = serve_engine(
        ScriptedEngine(pieces=pieces, token_seconds=0.05, end_after=len(pieces)),
        keepalive_seconds=0.02,
    )
    body = {
        "model": "m",
        "messages": USER,
        "tools": TOOLS,
        "tool_choice": "required",
        "stream": True,
    }
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        raw = client.post("/v1/chat/completions", json=body).text
        assert ": keep-alive" in raw
        # The start (once the name is whole), then the arguments as they come.
        assert raw.count('"tool_calls": [') > 2
        assert '"finish_reason": "tool_calls"' in raw

        lines = client.post("/api/chat", json={**body, "tool_choice": None}).text.splitlines()
        assert all(line.startswith("{") for line in lines)  # NDJSON only, no comments
        calls = [line for line in lines if "tool_calls" in line]
        assert len(calls) == 1 and '"arguments": {"city": "Oslo"}' in calls[0]


def test_password_accepts_bearer_and_x_api_key_and_refuses_in_each_shape(
    serve_engine: Serve,
) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(password="pw"))
    requests = [
        ("/v1/chat/completions", {"messages": USER, "max_tokens": 1}, "error"),
        ("/v1/messages", {"messages": USER, "max_tokens": 1}, "type"),
        ("/api/chat", {"model": "m", "messages": USER, "stream": False}, "error"),
    ]
    with httpx.Client(base_url=server.base_url) as client:
        for path, body, key in requests:
            refused = client.post(path, json=body)
            assert refused.status_code == 401 and key in refused.json(), path
            assert client.post(path, json=body, headers={"x-api-key": "pw"}).is_success
            bearer = client.post(path, json=body, headers={"Authorization": "Bearer pw"})
            assert bearer.is_success, path
    claude = anthropic.Anthropic(base_url=server.base_url, api_key="pw", max_retries=0)
    assert claude.messages.create(model="m", max_tokens=2, messages=USER).content
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=server.base_url, api_key="no", max_retries=0).messages.create(
            model="m", max_tokens=2, messages=USER
        )


def test_bad_requests_get_each_dialects_error_shape(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    with httpx.Client(base_url=server.base_url) as client:
        # As the real APIs answer: 400 for an invalid request (KoboldAI keeps its 422).
        openai_error = client.post("/v1/chat/completions", json={"messages": "nope"})
        assert openai_error.status_code == 400
        assert openai_error.json()["error"]["type"] == "invalid_request_error"
        assert client.post("/v1/completions", content=b"{").json()["error"]["message"]

        anthropic_error = client.post("/v1/messages", json={"messages": USER})  # no max_tokens
        assert anthropic_error.status_code == 400
        assert anthropic_error.json()["type"] == "error"
        assert anthropic_error.json()["error"]["type"] == "invalid_request_error"

        ollama_error = client.post("/api/generate", json={"prompt": "no model"})
        assert ollama_error.status_code == 400 and isinstance(ollama_error.json()["error"], str)

        unknown_tool = client.post(
            "/v1/chat/completions",
            json={
                "messages": USER,
                "tools": TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "missing"}},
            },
        )
        assert unknown_tool.status_code == 400 and "missing" in unknown_tool.text

        extra = client.post(
            "/v1/chat/completions",
            json={"messages": USER, "max_tokens": 1, "logit_bias": {}, "user": "u", "future": 1},
        )
        assert extra.is_success  # unknown fields are ignored


def test_queue_full_keeps_koboldcpp_body_in_every_dialect(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(token_seconds=0.05), HearthSettings(multiuser=0))
    busy = {
        "detail": {"msg": "Server is busy; please try again later.", "type": "service_unavailable"}
    }
    with (
        httpx.Client(base_url=server.base_url, timeout=30) as client,
        client.stream(
            "POST", "/api/extra/generate/stream", json={"prompt": "x", "max_length": 40}
        ) as running,
    ):
        lines = running.iter_lines()  # kept: dropping the iterator would close the stream
        next(lines)
        for path, body in [
            ("/v1/chat/completions", {"messages": USER}),
            ("/v1/messages", {"messages": USER, "max_tokens": 5}),
            ("/api/chat", {"model": "m", "messages": USER}),
        ]:
            refused = client.post(path, json=body)
            assert (refused.status_code, refused.json()) == (503, busy), path
        client.post("/api/extra/abort", json={})


def test_cors_preflight_and_headers(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    with httpx.Client(base_url=server.base_url) as client:
        preflight = client.options(
            "/v1/chat/completions",
            headers={
                "Origin": "https://example.org",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, x-api-key, content-type, genkey",
            },
        )
        assert preflight.status_code == 200
        allowed = preflight.headers["access-control-allow-headers"].lower()
        for header in ("authorization", "x-api-key", "content-type", "genkey"):
            assert header in allowed
        response = client.get("/v1/models", headers={"Origin": "https://example.org"})
        assert response.headers["access-control-allow-origin"] == "*"


def test_a_client_leaving_a_stream_of_choices_stops_every_choice(serve_engine: Serve) -> None:
    """`n: 2` streamed: the choices are two jobs (the scripted engine runs one at a time, so
    the second waits). A client that leaves after the first text stops the running one and
    takes the waiting one out of the line before it ever runs."""
    engine = ScriptedEngine(token_seconds=0.01)
    base_url = serve_engine(engine, HearthSettings(metrics=True)).base_url
    body = {"model": "m", "messages": USER, "max_tokens": 500, "n": 2, "stream": True}
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        for event in iter_sse(response):
            if event.data and json.loads(event.data)["choices"][0]["delta"].get("content"):
                break
    done = scrape_until(
        base_url,
        lambda s: (
            s.value("llamacpp:requests_processing") == s.value("llamacpp:requests_deferred") == 0
        ),
    )
    assert done.value("hearth_disconnects_total") == 2
    assert len(engine.requests) == 1


def test_choices_that_do_not_all_fit_in_the_queue_are_refused_whole(serve_engine: Serve) -> None:
    """Three choices where two places are left: a 503 with KoboldCpp's body, and neither
    admitted choice is left running; two choices then fit and are answered."""
    engine = ScriptedEngine(token_seconds=0.001)
    base_url = serve_engine(engine, HearthSettings(multiuser=2, metrics=True)).base_url
    body = {"model": "m", "messages": USER, "max_tokens": 3}
    refused = httpx.post(f"{base_url}/v1/chat/completions", json={**body, "n": 3})
    assert refused.status_code == 503
    assert refused.json()["detail"]["type"] == "service_unavailable"
    scrape_until(base_url, lambda s: s.value("llamacpp:requests_processing") == 0)
    answer = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x").chat.completions.create(
        **body, n=2
    )
    assert [choice.index for choice in answer.choices] == [0, 1]
    assert all(choice.finish_reason == "length" for choice in answer.choices)


def test_keep_alives_between_events_do_not_break_the_openai_client(serve_engine: Serve) -> None:
    """A keep-alive comment after an event with an `id:` once ended in a blank line, which the
    `openai` client (keeping the last event id) read as an empty event and failed to parse."""
    server = serve_engine(ScriptedEngine(token_seconds=0.1, end_after=4), keepalive_seconds=0.03)
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="none")
    stream = client.chat.completions.create(model="m", messages=USER, stream=True, max_tokens=4)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "Hello, world!"
    raw = httpx.post(
        f"{server.base_url}/v1/chat/completions",
        json={"model": "m", "messages": USER, "stream": True, "max_tokens": 4},
        timeout=30,
    ).text
    assert ": keep-alive" in raw  # the comments were there to be read


def test_verbose_server_gives_every_openai_answer_its_native_form(serve_engine: Serve) -> None:
    """llama-server's --verbose: `__verbose` on every OpenAI answer, as if each asked for it;
    without the flag only a request's own `verbose: true` does."""
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    verbose = serve_engine(ScriptedEngine(), HearthSettings(verbose=True))
    answer = httpx.post(f"{verbose.base_url}/v1/chat/completions", json=body).json()
    assert answer["__verbose"]["content"] == answer["choices"][0]["message"]["content"]
    completion = {"prompt": "Hi", "max_tokens": 2}
    answer = httpx.post(f"{verbose.base_url}/v1/completions", json=completion).json()
    assert answer["__verbose"]["prompt"] == "Hi"
    plain = serve_engine(ScriptedEngine())
    assert "__verbose" not in httpx.post(f"{plain.base_url}/v1/chat/completions", json=body).json()
