"""llama-server's Vertex AI prediction route (unit/test_compat_gcp.py in llama.cpp's suite),
over real HTTP with a scripted engine: `AIP_MODE=PREDICTION` turns it on, each instance runs
through the route its `@requestFormat` names (camelCase or path) and answers as that route
does, errors in the OpenAI shape, in place for one instance or for the whole body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from server.dialects.llama.gcp_routes import format_name
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
CHAT = {"max_tokens": 4, "messages": [{"role": "user", "content": "Say hello"}]}


@pytest.fixture
def vertex(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The environment Vertex AI gives a custom container (read when the app is made)."""
    monkeypatch.setenv("AIP_MODE", "PREDICTION")
    monkeypatch.delenv("AIP_PREDICT_ROUTE", raising=False)
    monkeypatch.delenv("AIP_HEALTH_ROUTE", raising=False)
    return monkeypatch


def predict(server: RunningServer, body: object, path: str = "/predict") -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=30)


def test_format_names_follow_llama_server_s_rule() -> None:
    assert format_name("/v1/chat/completions") == "chatCompletions"
    assert format_name("/apply-template") == "applyTemplate"
    assert format_name("/completion") == "completion"
    assert format_name("/v1/responses/input_tokens") == "responsesInputTokens"


def test_off_without_aip_mode(serve_engine: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIP_MODE", raising=False)
    answer = predict(serve_engine(ScriptedEngine()), {"instances": []})
    assert answer.status_code == 404
    assert answer.json()["error"]["type"] == "invalid_request_error"  # OpenAI's shape


def test_each_instance_answers_as_the_route_it_names(
    serve_engine: Serve, vertex: pytest.MonkeyPatch
) -> None:
    engine = ScriptedEngine()
    server = serve_engine(engine)
    instances = [
        {"@requestFormat": "chatCompletions", **CHAT},
        {"@requestFormat": "/completion", "prompt": "Once", "n_predict": 2, "stream": True},
        {"@requestFormat": "tokenize", "content": "ab"},
    ]
    answer = predict(server, {"instances": instances})
    assert answer.status_code == 200, answer.text
    chat, completion, tokens = answer.json()["predictions"]
    assert chat["object"] == "chat.completion"
    message = chat["choices"][0]["message"]
    assert (message["role"], message["content"]) == ("assistant", "Hello, world!")
    assert completion["content"] == "Hello," and completion["stop"] is True  # not streamed
    direct = httpx.post(f"{server.base_url}/tokenize", json={"content": "ab"}).json()
    assert tokens == direct
    assert len(engine.requests) == 2  # one generation per generating instance


def test_an_instance_that_cannot_run_answers_its_error_in_its_place(
    serve_engine: Serve, vertex: pytest.MonkeyPatch
) -> None:
    server = serve_engine(ScriptedEngine())
    instances = [
        {"@requestFormat": "chatCompletions", **CHAT},
        {"max_tokens": 2},
        {"@requestFormat": "noSuchRoute"},
        {"@requestFormat": "chatCompletions", "max_tokens": 2},  # no messages: the route's 400
        "not an object",
        {"@requestFormat": "predict", "instances": []},  # never the prediction route itself
    ]
    answer = predict(server, {"instances": instances})
    assert answer.status_code == 200, answer.text
    ok, unnamed, unknown, invalid, not_object, itself = answer.json()["predictions"]
    assert ok["choices"][0]["message"]["content"] == "Hello, world!"
    assert "@requestFormat" in unnamed["error"]["message"]
    assert unknown["error"]["message"] == "no handler registered for @requestFormat: noSuchRoute"
    assert "messages" in invalid["error"]["message"]
    assert not_object["error"]["type"] == "invalid_request_error"
    assert itself["error"]["message"].startswith("no handler registered")


@pytest.mark.parametrize(
    "body",
    [{"instances": {"a": 1}}, {}, [1], {"instances": [{}] * 129}],
    ids=["not-a-list", "missing", "not-an-object", "over-128"],
)
def test_a_body_without_a_list_of_instances_is_a_400(
    serve_engine: Serve, vertex: pytest.MonkeyPatch, body: object
) -> None:
    answer = predict(serve_engine(ScriptedEngine()), body)
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"


def test_the_routes_move_with_the_aip_variables(
    serve_engine: Serve, vertex: pytest.MonkeyPatch
) -> None:
    vertex.setenv("AIP_PREDICT_ROUTE", "v1/models/m:predict")  # no leading slash, as allowed
    vertex.setenv("AIP_HEALTH_ROUTE", "/ready")
    server = serve_engine(ScriptedEngine())
    body = {"instances": [{"@requestFormat": "chatCompletions", **CHAT}]}
    moved = predict(server, body, "/v1/models/m:predict")
    assert moved.status_code == 200 and len(moved.json()["predictions"]) == 1
    assert httpx.get(f"{server.base_url}/ready").json() == {"status": "ok"}
    described = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
    assert "instances" in str(described["/v1/models/m:predict"]["post"]["requestBody"])


def test_the_key_guards_the_route_and_reaches_each_instance(
    serve_engine: Serve, vertex: pytest.MonkeyPatch
) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(password="sesame"))
    body: dict[str, Any] = {"instances": [{"@requestFormat": "chatCompletions", **CHAT}]}
    refused = predict(server, body)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    headers = {"Authorization": "Bearer sesame"}
    answer = httpx.post(f"{server.base_url}/predict", json=body, headers=headers, timeout=30)
    assert answer.json()["predictions"][0]["choices"][0]["message"]["content"]
