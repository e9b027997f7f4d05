"""Ollama's /api/pull and /api/delete for Hugging Face models, with the official `ollama` client
against the real server, whose HF_ENDPOINT is a local stand-in for the Hub."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import ollama
import pytest

from server.models.files import resolve_model_path
from tests.support.hub_server import (
    GATED_REPO,
    MODEL_FILE,
    REPO,
    STORY_FILE,
    STORY_NAME,
    STORY_REPO,
    HubRepo,
    LocalHub,
)
from tests.support.servers import RunningServer

NAME = f"hf.co/{REPO}:Q4_K_M"


@pytest.fixture(scope="module")
def pull_hub(
    tmp_path_factory: pytest.TempPathFactory, bundled: Path, story_model: Path
) -> Iterator[LocalHub]:
    """The Hub the server subprocess pulls from (HF_ENDPOINT), one per module; unlike the
    `hub` fixture's, its Q8_0 file is another blob."""
    model = bundled
    # Another file's content (another blob): the bundled model with padding after its data.
    other = tmp_path_factory.mktemp("files") / "other.gguf"
    other.write_bytes(model.read_bytes() + bytes(2**20))
    local = LocalHub()
    local.add(HubRepo(REPO, {MODEL_FILE: model, "gemma-3-270m-Q8_0.gguf": other}))
    local.add(HubRepo(GATED_REPO, {MODEL_FILE: model}, gated=True))
    local.add(HubRepo(STORY_REPO, {STORY_FILE: story_model}))
    local.start()
    yield local
    local.stop()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hub-cache")


@pytest.fixture(scope="module")
def pull_server(
    pull_hub: LocalHub, cache: Path, start_hearth: Callable[..., RunningServer]
) -> RunningServer:
    return start_hearth(
        ["--contextsize", "1024"], env={"HF_ENDPOINT": pull_hub.url, "HF_HUB_CACHE": str(cache)}
    )


def cached_models(cache: Path) -> list[Path]:
    return sorted(cache.glob("models--*/snapshots/*/*.gguf"))


def test_pull_streams_ollamas_progress_lines_then_uses_the_cache(
    pull_server: RunningServer, pull_hub: LocalHub, cache: Path
) -> None:
    client = ollama.Client(host=pull_server.base_url)
    lines = list(client.pull(NAME, stream=True))
    statuses = [line.status for line in lines]
    assert statuses[0] == "pulling manifest"
    assert statuses[-3:] == ["verifying sha256 digest", "writing manifest", "success"]
    pulling = [line for line in lines if (line.status or "").startswith("pulling ")][1:]
    size = resolve_model_path(None).stat().st_size
    assert pulling and all(line.total == size for line in pulling)
    assert pulling[-1].completed == size
    completed = [line.completed or 0 for line in pulling]
    assert completed == sorted(completed)
    digest = pulling[0].digest or ""
    assert digest.startswith("sha256:") and pulling[0].status == f"pulling {digest[7:19]}"
    assert [path.name for path in cached_models(cache)] == [MODEL_FILE]
    downloads = len(pull_hub.downloads_of(MODEL_FILE))
    again = client.pull(NAME)  # not streamed: one answer
    assert again.status == "success"
    assert len(pull_hub.downloads_of(MODEL_FILE)) == downloads  # already complete: no download


def test_failed_pulls_in_ollamas_error_shape(pull_server: RunningServer) -> None:
    client = ollama.Client(host=pull_server.base_url)
    cases = {
        "hf.co/hearth-test/missing-GGUF": (404, "no such repository"),
        f"hf.co/{GATED_REPO}": (403, "is gated"),
        f"hf.co/{REPO}:Q2_K": (404, "has no Q2_K GGUF file (it has: Q4_K_M, Q8_0)"),
        "llama3.2": (400, "Hearth pulls models from Hugging Face only"),
    }
    for name, (status, message) in cases.items():
        with pytest.raises(ollama.ResponseError) as raised:
            client.pull(name)
        assert raised.value.status_code == status and message in raised.value.error
    streamed = httpx.post(
        f"{pull_server.base_url}/api/pull", json={"model": "hf.co/hearth-test/missing-GGUF"}
    )
    last = json.loads(streamed.text.strip().splitlines()[-1])
    assert "no such repository" in last["error"]  # in-stream, as Ollama reports it


def test_a_client_that_leaves_stops_the_pull_and_the_next_pull_resumes(
    pull_server: RunningServer, pull_hub: LocalHub, cache: Path
) -> None:
    name = f"hf.co/{REPO}:Q8_0"
    pull_hub.seconds_per_chunk = 0.05
    try:
        with httpx.stream(
            "POST", f"{pull_server.base_url}/api/pull", json={"model": name}
        ) as reply:
            for line in reply.iter_lines():
                if json.loads(line).get("completed"):
                    break  # some bytes arrived: leave
        partial = list(cache.glob("models--*/blobs/*.part"))
        assert partial, "the partial file is kept"
    finally:
        pull_hub.seconds_per_chunk = 0.0
    answer = ollama.Client(host=pull_server.base_url).pull(name)
    assert answer.status == "success"
    ranges = [r.range for r in pull_hub.downloads_of("gemma-3-270m-Q8_0.gguf")]
    assert ranges[0] is None and ranges[-1] is not None and ranges[-1].startswith("bytes=")


def test_delete_removes_a_pulled_model(pull_server: RunningServer, cache: Path) -> None:
    client = ollama.Client(host=pull_server.base_url)
    client.pull(NAME)
    assert MODEL_FILE in [path.name for path in cached_models(cache)]
    assert client.delete(NAME).status == "success"
    assert MODEL_FILE not in [path.name for path in cached_models(cache)]
    with pytest.raises(ollama.ResponseError) as raised:
        client.delete(NAME)
    assert raised.value.status_code == 404 and raised.value.error == f"model '{NAME}' not found"


@pytest.fixture(scope="module")
def joining_server(
    pull_hub: LocalHub,
    tmp_path_factory: pytest.TempPathFactory,
    start_hearth: Callable[..., RunningServer],
) -> RunningServer:
    """A server with an (empty) --modeldir and its own hub cache: pulled models join it.
    Shared by the two tests below (a server start each cost ~5 s), the one that needs the
    empty folder first."""
    folder = tmp_path_factory.mktemp("switching")
    models = folder / "models"
    models.mkdir()
    return start_hearth(
        ["--modeldir", str(models), "--contextsize", "1024"],
        env={"HF_ENDPOINT": pull_hub.url, "HF_HUB_CACHE": str(folder / "cache")},
    )


def test_with_a_model_dir_a_pulled_model_is_listed_and_chat_can_use_it(
    joining_server: RunningServer,
) -> None:
    client = ollama.Client(host=joining_server.base_url)
    assert NAME not in [tag.model for tag in client.list().models]
    assert client.pull(NAME).status == "success"
    assert NAME in [tag.model for tag in client.list().models]
    reply = client.chat(
        model=NAME, messages=[{"role": "user", "content": "Hi"}], options={"num_predict": 3}
    )
    assert reply.model == NAME
    joining_server.wait_for_output(f"Loaded {MODEL_FILE}")
    with pytest.raises(ollama.ResponseError) as loaded:
        client.delete(NAME)
    assert loaded.value.status_code == 400 and "is loaded: unload it first" in loaded.value.error
    assert client.generate(model=NAME, prompt="", keep_alive=0).done_reason == "unload"
    assert client.delete(NAME).status == "success"
    assert NAME not in [tag.model for tag in client.list().models]
    with pytest.raises(ollama.ResponseError) as gone:
        client.generate(model=NAME, prompt="Hi")
    assert gone.value.status_code == 404


def test_two_pulled_models_with_their_own_metadata_and_chat_switches_between_them(
    joining_server: RunningServer,
) -> None:
    """The second repository's file is the bundled model renamed with the gguf package: its
    listing, /api/show and the model that answers are its own."""
    client = ollama.Client(host=joining_server.base_url)
    story = f"hf.co/{STORY_REPO}:Q4_K_M"
    assert client.pull(NAME).status == "success" and client.pull(story).status == "success"
    sizes = {tag.model: tag.size for tag in client.list().models}
    assert sizes[story] != sizes[NAME]  # another name in the header: another size
    info = client.show(story).modelinfo or {}
    assert info["general.name"] == STORY_NAME
    for name in (story, NAME, story):
        reply = client.chat(
            model=name, messages=[{"role": "user", "content": "Hi"}], options={"num_predict": 2}
        )
        assert reply.model == name
    loads = [line for line in joining_server.output if "Loaded " in line]
    assert [line.split("Loaded ")[1].split(":")[0] for line in loads[-3:]] == [
        STORY_FILE,
        MODEL_FILE,
        STORY_FILE,
    ]
