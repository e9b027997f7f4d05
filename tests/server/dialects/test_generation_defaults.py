"""KoboldCpp's --gendefaults (with --gendefaultsoverwrite) in every API: the fields a request
leaves out are filled in from the settings, named as KoboldCpp names them or as the API does;
what a request sets is kept unless overwriting is asked for. Over real HTTP with the scripted
engine, which records the one GenerationRequest each route makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from server.dialects.edge.generation_defaults import with_generation_defaults
from server.dialects.kobold.schemas import KoboldGenerateRequest, KoboldTokenCountRequest
from server.dialects.llama.schemas import CompletionRequest
from server.dialects.ollama.schemas import OllamaChatRequest
from server.dialects.openai.requests import OpenAIChatRequest
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
DEFAULTS = {"temperature": 0.25, "top_k": 7, "rep_pen": 1.3, "max_length": 3}
CHAT = [{"role": "user", "content": "Hi"}]


def test_a_sampler_s_koboldcpp_name_sets_each_api_s_field() -> None:
    openai = with_generation_defaults({"messages": CHAT}, OpenAIChatRequest, DEFAULTS, False)
    assert openai["repetition_penalty"] == 1.3 and openai["top_k"] == 7
    # The reply's length by any of its names sets the API's own (both of OpenAI's).
    assert (openai["max_tokens"], openai["max_completion_tokens"]) == (3, 3)
    llama = with_generation_defaults({"prompt": "x"}, CompletionRequest, DEFAULTS, False)
    assert (llama["repeat_penalty"], llama["n_predict"]) == (1.3, 3)
    ollama = with_generation_defaults({"messages": CHAT}, OllamaChatRequest, DEFAULTS, False)
    assert ollama["options"] == {"temperature": 0.25, "top_k": 7, "repeat_penalty": 1.3,
                                 "num_predict": 3}  # fmt: skip
    # An API's own name works too, for its API.
    llama = with_generation_defaults({}, CompletionRequest, {"repeat_penalty": 1.1}, False)
    kobold = with_generation_defaults({}, KoboldGenerateRequest, {"repeat_penalty": 1.1}, False)
    assert llama == {"repeat_penalty": 1.1} and kobold == {}


def test_what_a_request_sets_stays_unless_overwriting() -> None:
    body = {"prompt": "x", "temperature": 1.0, "max_length": 50}
    kept = with_generation_defaults(body, KoboldGenerateRequest, DEFAULTS, False)
    assert (kept["temperature"], kept["max_length"], kept["top_k"]) == (1.0, 50, 7)
    over = with_generation_defaults(body, KoboldGenerateRequest, DEFAULTS, True)
    assert (over["temperature"], over["max_length"]) == (0.25, 3)
    options = {"messages": CHAT, "options": {"temperature": 1.0}}
    chat = with_generation_defaults(options, OllamaChatRequest, DEFAULTS, False)
    assert chat["options"]["temperature"] == 1.0 and chat["options"]["top_k"] == 7


def test_a_body_that_generates_nothing_is_left_as_it_is() -> None:
    body = {"prompt": "x"}
    assert with_generation_defaults(body, KoboldTokenCountRequest, DEFAULTS, True) is body
    assert with_generation_defaults(body, KoboldGenerateRequest, {}, True) is body


def serve_with(serve_engine: Serve, engine: ScriptedEngine, **values: Any) -> RunningServer:
    return serve_engine(engine, HearthSettings(**values))


def test_every_api_s_requests_get_the_defaults(serve_engine: Serve) -> None:
    engine = ScriptedEngine()
    server = serve_with(serve_engine, engine, gendefaults=DEFAULTS)
    with server.client() as client:
        calls = [
            ("/api/v1/generate", {"prompt": "x"}),
            ("/v1/chat/completions", {"messages": CHAT}),
            ("/v1/completions", {"prompt": "x"}),
            ("/completion", {"prompt": "x"}),
            ("/api/chat", {"model": "m", "messages": CHAT, "stream": False}),
            ("/v1/messages", {"messages": CHAT, "max_tokens": 3}),  # Anthropic's is required
        ]
        for path, body in calls:
            assert client.post(path, json=body).status_code == 200, path
        # A request's own values win.
        own = {"prompt": "x", "temperature": 1.5, "max_length": 5}
        assert client.post("/api/v1/generate", json=own).status_code == 200
    for request in engine.requests[: len(calls)]:
        assert (request.sampling.temperature, request.max_tokens) == (0.25, 3), request.dialect
        if request.dialect != "anthropic":  # it has no repetition penalty
            assert request.sampling.rep_pen == 1.3, request.dialect
    assert (engine.requests[-1].sampling.temperature, engine.requests[-1].max_tokens) == (1.5, 5)
    assert engine.requests[-1].sampling.top_k == 7


def test_overwriting_defaults_win_over_the_request(serve_engine: Serve) -> None:
    engine = ScriptedEngine()
    server = serve_with(serve_engine, engine, gendefaults=DEFAULTS, gendefaultsoverwrite=True)
    body = {"messages": CHAT, "temperature": 1.5, "max_tokens": 9}
    assert httpx.post(f"{server.base_url}/v1/chat/completions", json=body).status_code == 200
    assert (engine.requests[0].sampling.temperature, engine.requests[0].max_tokens) == (0.25, 3)


@pytest.mark.parametrize(
    ("path", "body", "shape"),
    [
        ("/api/v1/generate", {"prompt": "x"}, "detail"),
        ("/v1/chat/completions", {"messages": CHAT}, "error"),
    ],
)
def test_a_default_that_does_not_fit_is_the_server_s_error(
    serve_engine: Serve, path: str, body: dict[str, Any], shape: str
) -> None:
    server = serve_with(serve_engine, ScriptedEngine(), gendefaults={"temperature": "warm"})
    response = httpx.post(f"{server.base_url}{path}", json=body)
    assert response.status_code == 500
    assert "--gendefaults" in response.text and "temperature" in response.text
    assert shape in response.json()
