"""llama-server's LoRA routes and per-request `lora` at the edge, on the scripted engine: GET
and POST /lora-adapters in llama-server's shapes, errors in its (OpenAI's) shape, and the
scales each route hands the engine. The engine applying them is test_lora_api_real.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.settings.config import HearthSettings
from tests.support.error_shapes import assert_error_shape
from tests.support.lora_gguf import write_lora
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]


@pytest.fixture
def adapters(tmp_path: Path, bundled: Path) -> tuple[Path, Path]:
    """Two adapter files (their tensors do not matter here: nothing loads them)."""
    first = write_lora(tmp_path / "story.gguf", bundled, task_name="storyteller")
    return first, write_lora(tmp_path / "other.gguf", bundled, seed=1)


def test_a_server_without_adapters_lists_none_and_takes_no_id(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    with server.client() as client:
        assert client.get("/lora-adapters").json() == []
        assert client.post("/lora-adapters", json=[]).json() == {"success": True}
        refused = client.post("/lora-adapters", json=[{"id": 0, "scale": 1}])
        assert refused.status_code == 400
        assert "invalid adapter id 0" in refused.json()["error"]["message"]
        assert_error_shape("/lora-adapters", refused.json())


def test_the_adapters_are_listed_and_their_scales_set(
    serve_engine: Serve, adapters: tuple[Path, Path]
) -> None:
    first, second = adapters
    settings = HearthSettings(lora=[str(first)], loramult=0.5, lora_scaled=[f"{second}:2"])
    server = serve_engine(ScriptedEngine(), settings)
    with server.client() as client:
        assert client.get("/lora-adapters").json() == [
            {"id": 0, "path": str(first), "scale": 0.5, "task_name": "storyteller",
             "prompt_prefix": ""},
            {"id": 1, "path": str(second), "scale": 2.0, "task_name": "", "prompt_prefix": ""},
        ]  # fmt: skip
        # An adapter the list does not name goes to 0, as in llama-server.
        set_ = client.post("/lora-adapters", json=[{"id": 1, "scale": 0.25}])
        assert set_.status_code == 200 and set_.json() == {"success": True}
        assert [a["scale"] for a in client.get("/lora-adapters").json()] == [0.0, 0.25]
        assert settings.lora_scales_now() == [0.0, 0.25]  # what the engines read


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"id": 0, "scale": 1}, "must be an array"),
        ([{"id": 2, "scale": 1}], "invalid adapter id 2 (ids: 0 to 1)"),
        ([{"id": -1, "scale": 1}], "invalid adapter id -1"),
        ([{"scale": 1}], "id"),
        ([{"id": 0, "scale": "lots"}], "scale"),
        ("not json at all", "not valid JSON"),
    ],
)
def test_a_bad_list_is_a_400_that_changes_nothing(
    serve_engine: Serve, adapters: tuple[Path, Path], body: Any, why: str
) -> None:
    settings = HearthSettings(lora=[str(file) for file in adapters])
    server = serve_engine(ScriptedEngine(), settings)
    with server.client() as client:
        if isinstance(body, str):
            answer = client.post("/lora-adapters", content=body.encode())
        else:
            answer = client.post("/lora-adapters", json=body)
        assert answer.status_code == 400, answer.text
        assert why in answer.json()["error"]["message"]
        assert_error_shape("/lora-adapters", answer.json())
    assert settings.lora_scales_now() == [1.0, 1.0]


def test_the_routes_ask_for_the_password(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(password="secret"))
    with server.client() as client:
        assert client.get("/lora-adapters").status_code == 401
        assert client.post("/lora-adapters", json=[]).status_code == 401
        keyed = {"Authorization": "Bearer secret"}
        assert client.get("/lora-adapters", headers=keyed).json() == []


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/completion", {"prompt": "Once", "n_predict": 2}),
        ("/v1/completions", {"prompt": "Once", "max_tokens": 2}),
        ("/completions", {"prompt": "Once", "n_predict": 2}),  # llama-server's native one
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}),
        ("/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}),
    ],
)
def test_a_request_s_own_scales_reach_the_engine(
    serve_engine: Serve, adapters: tuple[Path, Path], path: str, body: dict[str, Any]
) -> None:
    engine = ScriptedEngine()
    server = serve_engine(engine, HearthSettings(lora=[str(file) for file in adapters]))
    lora = [{"id": 1, "scale": 0.5}, {"id": 0, "scale": -1}]
    with server.client() as client:
        for given, expected in [
            (lora, ((1, 0.5), (0, -1.0))),
            (None, None),  # the server's scales, whatever they are when it starts
            ([], None),  # an empty list too, as llama-server reads it
        ]:
            answer = client.post(path, json={**body, "lora": given})
            assert answer.status_code == 200, answer.text
            assert engine.requests[-1].lora == expected
        refused = client.post(path, json={**body, "lora": [{"id": 5, "scale": 1}]})
        assert refused.status_code == 400
        assert "invalid adapter id 5" in refused.json()["error"]["message"]
        assert_error_shape(path, refused.json())
        assert client.post(path, json={**body, "lora": {"id": 0}}).status_code == 400


def test_a_request_naming_an_adapter_on_a_server_without_any_is_refused(
    serve_engine: Serve,
) -> None:
    server = serve_engine(ScriptedEngine())
    answer = httpx.post(
        f"{server.base_url}/completion",
        json={"prompt": "Once", "n_predict": 2, "lora": [{"id": 0, "scale": 1}]},
    )
    assert answer.status_code == 400
    assert "the server has no LoRA adapters" in answer.json()["error"]["message"]
