"""Issue 12 with the real server: KoboldCpp's admin API, Ollama's keep_alive and load/unload
requests, downloaded models listed beside --modeldir, /api/v1/model after a switch, and the
multiuser queue rules held while a request switches models."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest

from server.models.files import resolve_model_path
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

SERVED = "gemma-3-270m-q4_k_m"
OTHER = "story-writer"
HUB_NAME = "hf.co/tester/tiny-GGUF:Q8_0"
ADMIN_KEY = "let-me-switch"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def same_bytes(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:  # the same weights under another name: a hard link, no copy
        os.link(resolve_model_path(None), target)
    except OSError:
        shutil.copyfile(resolve_model_path(None), target)


@pytest.fixture(scope="module")
def admin_server(
    tmp_path_factory: pytest.TempPathFactory, start_hearth: Callable[..., RunningServer]
) -> RunningServer:
    folder = tmp_path_factory.mktemp("models")
    same_bytes(folder / f"{OTHER}.gguf")
    (folder / "story.kcpps").write_text(json.dumps({"model_param": f"{OTHER}.gguf"}))
    # A model downloaded earlier, in the Hugging Face cache's own layout.
    linked = tmp_path_factory.mktemp("link") / "models"
    linked.symlink_to(folder)  # a model folder reached through a link (a data disk)
    cache = tmp_path_factory.mktemp("hub")
    same_bytes(cache / "models--tester--tiny-GGUF" / "snapshots" / "0123abc" / "tiny-Q8_0.gguf")
    return start_hearth(
        [
            *("--modeldir", str(linked), "--admin", "--adminpassword", ADMIN_KEY),
            *("--multiuser", "2", "--contextsize", "1024"),
        ],
        env={"HF_HUB_CACHE": str(cache)},
    )


def current_model(server: RunningServer) -> str:
    result: str = httpx.get(f"{server.base_url}/api/v1/model").json()["result"]
    return result


def perf(server: RunningServer) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{server.base_url}/api/extra/perf").json()
    return answer


def until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_downloaded_models_are_listed_and_served_by_their_hub_name(
    admin_server: RunningServer,
) -> None:
    client = ollama.Client(host=admin_server.base_url)
    names = [tag.model for tag in client.list().models]
    assert names == [f"{SERVED}:latest", f"{OTHER}:latest", HUB_NAME]
    reply = client.generate(model=HUB_NAME, prompt="The sea", options={"num_predict": 3})
    assert reply.model == HUB_NAME and reply.response
    assert current_model(admin_server) == f"koboldcpp/{HUB_NAME}"


def test_the_admin_api_lists_and_switches_models(admin_server: RunningServer) -> None:
    base = admin_server.base_url
    assert httpx.get(f"{base}/api/extra/version").json()["admin"] == 2
    refused = httpx.get(f"{base}/api/admin/list_options")
    assert refused.status_code == 401 and refused.json()["detail"]["type"] == "unauthorized"
    options = httpx.get(f"{base}/api/admin/list_options", headers=ADMIN).json()
    assert options == [
        SERVED,
        f"{OTHER}.gguf",
        HUB_NAME,
        "story.kcpps",
        "initial_model",
        "unload_model",
    ]

    def reload(filename: str) -> httpx.Response:
        return httpx.post(
            f"{base}/api/admin/reload_config",
            json={"filename": filename},
            headers=ADMIN,
            timeout=120,
        )

    switched = reload("story.kcpps")
    assert switched.status_code == 200 and switched.json()["success"] is True
    assert "restart" in switched.json()["note"]  # only the file's model is applied
    assert current_model(admin_server) == f"koboldcpp/{OTHER}"
    assert reload("unload_model").json() == {"success": True, "model": None}
    assert current_model(admin_server) == "koboldcpp/inactive"
    assert perf(admin_server)["loaded_models"] == []
    assert reload("initial_model").json()["success"] is True
    assert current_model(admin_server) == f"koboldcpp/{SERVED}"
    unknown = reload("llama-70b.gguf")
    assert unknown.status_code == 404 and unknown.json()["success"] is False


def test_keep_alive_zero_unloads_and_an_empty_prompt_loads(admin_server: RunningServer) -> None:
    client = ollama.Client(host=admin_server.base_url)
    chat = client.chat(
        model=OTHER,
        messages=[{"role": "user", "content": "Hi"}],
        options={"num_predict": 3},
        keep_alive=0,
    )
    assert chat.model == OTHER
    until(lambda: client.ps().models == [], "the model to unload after the reply")
    assert current_model(admin_server) == "koboldcpp/inactive"
    counted = httpx.post(f"{admin_server.base_url}/api/extra/tokencount", json={"prompt": "Hi"})
    assert counted.status_code == 200 and counted.json()["value"] > 0  # no engine needed
    # No model named, none loaded: the first listed model serves (and stays loaded).
    kobold = httpx.post(
        f"{admin_server.base_url}/api/v1/generate", json={"prompt": "Hi", "max_length": 2}
    )
    assert kobold.status_code == 200 and current_model(admin_server) == f"koboldcpp/{SERVED}"

    loaded = client.generate(model=OTHER, prompt="", keep_alive="10m")
    assert loaded.done_reason == "load" and loaded.response == ""
    (running,) = client.ps().models
    assert running.model == f"{OTHER}:latest" and running.expires_at is not None
    client.generate(model=OTHER, prompt="", keep_alive=1e12)  # past Go's longest: never
    (forever,) = client.ps().models
    assert forever.expires_at is not None and forever.expires_at.year > 2200
    unloaded = client.generate(model=OTHER, prompt="", keep_alive=0)
    assert unloaded.done_reason == "unload" and client.ps().models == []
    with pytest.raises(ollama.ResponseError) as bad:
        client.generate(model=OTHER, prompt="Hi", keep_alive="soon")
    assert bad.value.status_code == 400 and "invalid duration" in bad.value.error


def test_the_queue_rules_hold_while_a_request_switches_models(
    admin_server: RunningServer,
) -> None:
    """--multiuser 2: one request loading another model and running, one waiting behind it,
    a third refused with KoboldCpp's 503; the waiting one then runs on its own model."""
    base = admin_server.base_url
    before = len(admin_server.output)
    was_loaded = SERVED in perf(admin_server)["loaded_models"]
    ollama.Client(host=base).generate(model=SERVED, prompt="")  # the served model is current
    if not was_loaded:  # its load line is read from the pipe after the reply may have come
        admin_server.wait_for_output(f"Loaded {SERVED}", after=before)
    start = len(admin_server.output)

    async def scenario() -> tuple[int, str, str]:
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            first_request = {"model": OTHER, "prompt": "Once", "max_tokens": 400, "stream": True}
            async with client.stream("POST", "/v1/completions", json=first_request) as first:
                await asyncio.to_thread(until, lambda: perf(admin_server)["running"] == 1, "A")
                second = asyncio.create_task(
                    client.post(
                        "/v1/completions", json={"model": SERVED, "prompt": "Two", "max_tokens": 3}
                    )
                )
                await asyncio.to_thread(until, lambda: perf(admin_server)["queue"] == 1, "B")
                third = await client.post(
                    "/v1/completions", json={"model": SERVED, "prompt": "Three", "max_tokens": 3}
                )
                async for line in first.aiter_lines():  # A runs on its model...
                    if line.startswith("data: {"):
                        first_model = json.loads(line[6:])["model"]
                        break
            # ...and leaving it frees the place: B switches back and answers.
            answer = await second
            return third.status_code, first_model, answer.json()["model"]

    refused, first_model, second_model = asyncio.run(scenario())
    assert refused == 503
    assert (first_model, second_model) == (OTHER, SERVED)
    admin_server.wait_for_output(f"Loaded {SERVED}", after=start)
    loads = [line.split(":")[0] for line in admin_server.output[start:] if "Loaded " in line]
    assert [load.split("Loaded ")[1] for load in loads] == [f"{OTHER}.gguf", f"{SERVED}.gguf"]


def test_without_an_admin_password_the_server_password_guards_the_admin_api(
    serve_engine: Callable[..., RunningServer],
) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(admin=True, password="pw"))
    refused = httpx.get(f"{server.base_url}/api/admin/list_options")
    assert refused.status_code == 401
    with_key = httpx.get(
        f"{server.base_url}/api/admin/list_options", headers={"Authorization": "Bearer pw"}
    )
    assert with_key.status_code == 403  # past the key: a scripted engine cannot switch
