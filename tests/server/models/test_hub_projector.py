"""`--hf` brings the repository's projector with the model, as llama-server's `-hf` does,
against the local stand-in for the Hugging Face Hub (tests/support/hub_server.py): the one
llama-server would pick, downloaded once with progress, then found in the cache with the hub
gone; none with `--no-mmproj` or `--mmproj`. The last test runs the real server on it."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from server.models.fetch import ModelFiles, model_files_for
from server.settings.config import HearthSettings
from tests.support.hub_server import HubRepo, LocalHub
from tests.support.projector_gguf import media_tokens_per_image, png_bytes, write_projector
from tests.support.servers import RunningServer

VISION = "hearth-test/seeing-gemma-GGUF"
PROJECTORS = ("mmproj-F16.gguf", "mmproj-Q8_0.gguf")


@pytest.fixture
def vision_hub(hub: LocalHub, bundled: Path, tmp_path: Path) -> LocalHub:
    """The hub with VISION: the bundled weights as Q4_K_M and Q8_0 files, and two real tiny
    projectors (F16 and Q8_0 in name)."""
    folder = tmp_path / "projectors"
    folder.mkdir()
    files = {"seeing-gemma-Q4_K_M.gguf": bundled, "seeing-gemma-Q8_0.gguf": bundled}
    for seed, name in enumerate(PROJECTORS):
        files[name] = write_projector(folder / name, bundled, f16="F16" in name, seed=seed)
    hub.add(HubRepo(VISION, files))
    return hub


def test_hf_brings_the_projector_llama_server_picks_and_finds_it_offline(
    vision_hub: LocalHub,
) -> None:
    seen: list[tuple[int, int | None]] = []
    fetched = model_files_for(
        HearthSettings(hf=f"{VISION}:Q4_K_M"), lambda done, total: seen.append((done, total))
    )
    assert fetched.model.name == "seeing-gemma-Q4_K_M.gguf"
    # llama-server's rule: the quantization closest to the model's (8 bits is nearer 4 than 16).
    assert fetched.projector is not None and fetched.projector.name == "mmproj-Q8_0.gguf"
    assert fetched.projector.parent == fetched.model.parent  # beside it in the cache snapshot
    local = vision_hub.repos[VISION].files["mmproj-Q8_0.gguf"]
    assert fetched.projector.read_bytes() == local.read_bytes()
    size = local.stat().st_size
    assert (size, size) in seen  # its progress reported like the model's
    assert len(vision_hub.downloads_of("mmproj-Q8_0.gguf")) == 1
    assert vision_hub.downloads_of("mmproj-F16.gguf") == []  # only the one picked comes down
    asked = len(vision_hub.requests)
    vision_hub.stop()  # offline: both come from the cache, without a request
    assert model_files_for(HearthSettings(hf=f"{VISION}:Q4_K_M")) == fetched
    assert len(vision_hub.requests) == asked


def test_no_mmproj_or_a_given_projector_downloads_none(
    vision_hub: LocalHub, tmp_path: Path, bundled: Path
) -> None:
    spec = f"{VISION}:Q8_0"
    fetched = model_files_for(HearthSettings(hf=spec, no_mmproj=True))
    assert fetched.model.name == "seeing-gemma-Q8_0.gguf" and fetched.projector is None
    given = str(tmp_path / "projectors" / "mmproj-F16.gguf")
    assert model_files_for(HearthSettings(hf=spec, mmproj=given)) == ModelFiles(fetched.model)
    assert all(vision_hub.downloads_of(name) == [] for name in PROJECTORS)


def test_the_server_started_with_hf_sees_images_through_the_downloaded_projector(
    vision_hub: LocalHub, tmp_path: Path, start_hearth: Callable[..., RunningServer]
) -> None:
    env = {"HF_ENDPOINT": vision_hub.url, "HF_HUB_CACHE": str(tmp_path / "served")}
    server = start_hearth(["--hf", f"{VISION}:Q4_K_M", "--contextsize", "1024"], env=env)
    server.wait_for_output("Projector for seeing-gemma-Q4_K_M: mmproj-Q8_0.gguf (vision)")
    assert httpx.get(f"{server.base_url}/props").json()["modalities"]["vision"] is True
    image = base64.b64encode(png_bytes(16, 16, (200, 30, 30))).decode()

    def ask(*parts: dict[str, object]) -> httpx.Response:
        content = [{"type": "text", "text": "What is this?"}, *parts]
        body = {"messages": [{"role": "user", "content": content}], "max_tokens": 2}
        return httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=120)

    text = ask()
    seen = ask({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}})
    assert text.status_code == 200 and seen.status_code == 200, seen.text
    extra = seen.json()["usage"]["prompt_tokens"] - text.json()["usage"]["prompt_tokens"]
    assert extra >= media_tokens_per_image(32, 4)
