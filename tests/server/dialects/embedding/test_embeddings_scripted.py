"""Embedding routes' wire shapes and errors over real HTTP, with the scripted engine (its
vectors: tests/scripted_engine.scripted_embedding). The real model: test_embeddings_real.py."""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Callable

import httpx
import pytest

from server.settings.config import HearthSettings
from tests.support.error_shapes import assert_error_shape
from tests.support.scripted_engine import (
    SCRIPTED_EMBEDDING_SIZE,
    ScriptedEngine,
    scripted_embedding,
)
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
BUSY = {"detail": {"msg": "Server is busy; please try again later.", "type": "service_unavailable"}}


def test_openai_shape_with_floats_base64_and_token_inputs(serve_engine: Serve) -> None:
    engine = ScriptedEngine()
    server = serve_engine(engine)
    with server.client() as client:
        answer = client.post("/v1/embeddings", json={"input": ["a", "b"], "model": "m"}).json()
        packed = client.post("/embeddings", json={"input": "a", "encoding_format": "base64"}).json()
        client.post("/v1/embeddings", json={"input": [[1, 2], [3]]})
        client.post("/v1/embeddings", json={"input": [5, 6, 7]})
    assert answer["object"] == "list" and answer["model"] == "scripted"
    assert answer["usage"] == {"prompt_tokens": 2, "total_tokens": 2}
    assert [item["index"] for item in answer["data"]] == [0, 1]
    assert {item["object"] for item in answer["data"]} == {"embedding"}
    assert answer["data"][1]["embedding"] == pytest.approx(scripted_embedding("b"))
    raw = base64.b64decode(packed["data"][0]["embedding"])
    floats = struct.unpack(f"<{SCRIPTED_EMBEDDING_SIZE}f", raw)
    assert floats == pytest.approx(scripted_embedding("a"), abs=1e-6)
    token_inputs = [request.embed_inputs for request in engine.requests[2:]]
    assert token_inputs == [((1, 2), (3,)), ((5, 6, 7),)]
    assert not engine.requests[0].embed_truncate  # OpenAI refuses what is too long


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/embeddings", {"input": []}, 400),
        ("/v1/embeddings", {"input": ["fine", ""]}, 400),
        ("/v1/embeddings", {"input": {"text": "x"}}, 400),
        ("/v1/embeddings", {"input": "x", "dimensions": 3}, 400),
        ("/v1/embeddings", {"input": "x", "encoding_format": "int8"}, 400),
        ("/embeddings", {}, 400),
        ("/api/extra/embeddings", {"input": []}, 400),
        ("/api/extra/embeddings", {"input": 7}, 422),  # KoboldAI's status for wrong types
        ("/api/embed", {"model": "m", "input": ["a", ""]}, 400),
        ("/api/embed", {"model": "m", "input": [1, 2]}, 400),
        ("/api/embed", {"input": "x"}, 400),
        ("/api/embeddings", {"model": "m", "prompt": 3}, 400),
    ],
)
def test_bad_input_is_a_4xx_in_the_dialects_shape(
    serve_engine: Serve, path: str, body: dict[str, object], status: int
) -> None:
    server = serve_engine(ScriptedEngine())
    answer = httpx.post(f"{server.base_url}{path}", json=body)
    assert answer.status_code == status, answer.text
    assert_error_shape(path, answer.json())


def test_an_input_longer_than_the_model_takes(serve_engine: Serve) -> None:
    engine = ScriptedEngine(context_size=8)
    server = serve_engine(engine)
    long = "x" * 20
    with server.client() as client:
        refused = client.post("/v1/embeddings", json={"input": long})
        cut = client.post("/api/embed", json={"model": "m", "input": long})
        refused_too = client.post(
            "/api/embed", json={"model": "m", "input": long, "truncate": False}
        )
        kobold = client.post("/api/extra/embeddings", json={"input": [long]})
    assert refused.status_code == 400 and "20 tokens" in refused.json()["error"]["message"]
    assert cut.status_code == 200 and cut.json()["prompt_eval_count"] == 8
    assert refused_too.status_code == 400 and "20 tokens" in refused_too.json()["error"]
    assert kobold.status_code == 200  # KoboldCpp's truncate defaults to true


def test_ollama_shapes_and_an_empty_input_that_only_loads(serve_engine: Serve) -> None:
    engine = ScriptedEngine()
    server = serve_engine(engine)
    with server.client() as client:
        embed = client.post("/api/embed", json={"model": "m", "input": ["a", "b"]}).json()
        legacy = client.post("/api/embeddings", json={"model": "m", "prompt": "a"}).json()
        empty = client.post("/api/embed", json={"model": "m", "input": []}).json()
        legacy_empty = client.post("/api/embeddings", json={"model": "m"}).json()
    assert embed["model"] == "scripted" and embed["prompt_eval_count"] == 2
    assert embed["embeddings"] == [
        pytest.approx(scripted_embedding("a")),
        pytest.approx(scripted_embedding("b")),
    ]
    assert embed["total_duration"] > 0 and embed["load_duration"] == 0
    assert legacy == {"embedding": pytest.approx(scripted_embedding("a"))}
    assert empty["embeddings"] == [] and legacy_empty == {"embedding": []}
    assert [bool(request.embed_inputs) for request in engine.requests] == [True, True]


def test_kobold_mirrors_openai_and_asks_for_the_password(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(password="pw"))
    path = f"{server.base_url}/api/extra/embeddings"
    assert httpx.post(path, json={"input": "a"}).status_code == 401
    answer = httpx.post(path, json={"input": "a"}, headers={"Authorization": "Bearer pw"}).json()
    assert answer["data"][0]["embedding"] == pytest.approx(scripted_embedding("a"))
    assert answer["usage"]["prompt_tokens"] == 1


def test_a_full_queue_refuses_embeddings_with_koboldcpps_503(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(token_seconds=0.05), HearthSettings(multiuser=0))
    with (
        httpx.Client(base_url=server.base_url, timeout=30) as client,
        client.stream(
            "POST", "/api/extra/generate/stream", json={"prompt": "x", "max_length": 40}
        ) as running,
    ):
        lines = running.iter_lines()  # kept: dropping the iterator would close the stream
        next(lines)
        for path, body in [
            ("/v1/embeddings", {"input": "x"}),
            ("/api/embed", {"model": "m", "input": "x"}),
            ("/api/extra/embeddings", {"input": "x"}),
        ]:
            refused = client.post(path, json=body)
            assert (refused.status_code, refused.json()) == (503, BUSY), path
        client.post("/api/extra/abort", json={})


def test_each_embedding_request_logs_one_line(
    serve_engine: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server = serve_engine(ScriptedEngine())
    with caplog.at_level("INFO", logger="hearth"):
        httpx.post(f"{server.base_url}/v1/embeddings", json={"input": ["ab", "c"]})
        # The line is written just after the answer is handed over: wait for it, bounded.
        deadline = time.monotonic() + 10
        while not _embedded_lines(caplog) and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = _embedded_lines(caplog)
    assert len(lines) == 1 and "embedded 2 inputs, 3 tokens, in 1 decode" in lines[0]


def _embedded_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "] embedded " in r.getMessage()]
