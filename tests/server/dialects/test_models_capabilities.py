"""llama-server's `models` list beside `data` at GET /v1/models and GET /models
(unit/test_vision_api.py::test_models_supports_multimodal_capability and
::test_v1_models_supports_multimodal_capability), over real HTTP with a scripted engine:
each model's `capabilities` say "multimodal" when its projector takes images or sounds, and
/v1/models keeps OpenAI's shape around it."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]


@pytest.mark.parametrize("path", ["/v1/models", "/models"])
def test_a_model_with_a_projector_is_multimodal(serve_engine: Serve, path: str) -> None:
    server = serve_engine(ScriptedEngine(modalities=frozenset({"vision"})))
    listing = httpx.get(server.base_url + path, timeout=10).json()
    assert listing["object"] == "list"
    assert [entry["id"] for entry in listing["data"]] == ["scripted"]
    (model,) = listing["models"]
    assert model["name"] == model["model"] == "scripted"
    assert model["capabilities"] == ["completion", "multimodal"]
    assert model["type"] == "model" and model["details"]["format"] == "gguf"


@pytest.mark.parametrize("path", ["/v1/models", "/models"])
def test_a_text_model_only_completes(serve_engine: Serve, path: str) -> None:
    server = serve_engine(ScriptedEngine())
    listing = httpx.get(server.base_url + path, timeout=10).json()
    assert [model["capabilities"] for model in listing["models"]] == [["completion"]]


def test_v1_models_keeps_openais_entries(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(modalities=frozenset({"audio"})))
    listing = httpx.get(server.base_url + "/v1/models", timeout=10).json()
    assert set(listing) == {"object", "data", "models"}
    assert listing["data"][0]["object"] == "model"
    assert "multimodal" in listing["models"][0]["capabilities"]
