"""--modeldir pairs each model with the projector beside it, on the real server: a folder of
two models (the bundled weights twice, each in a folder of its own), one with a real tiny
projector beside it. The paired model, loaded by the pool when a request names it, reads an
image (its tokens counted); the other answers the image with a 400; `/api/show` says which
sees; the console names the pairing at start."""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import ollama
import openai
import pytest

from tests.support.projector_gguf import media_tokens_per_image, png_bytes, write_projector
from tests.support.servers import RunningServer

SEEING, BLIND = "seeing", "blind"


def same_bytes(target: Path, source: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


@pytest.fixture(scope="module")
def paired(
    bundled: Path,
    tmp_path_factory: pytest.TempPathFactory,
    start_hearth: Callable[..., RunningServer],
) -> RunningServer:
    folder = tmp_path_factory.mktemp("paired-models")
    same_bytes(folder / "vision" / f"{SEEING}.gguf", bundled)
    write_projector(folder / "vision" / "mmproj-F16.gguf", bundled, f16=True)
    same_bytes(folder / "text" / f"{BLIND}.gguf", bundled)
    return start_hearth(["--modeldir", str(folder), "--contextsize", "1024"])


def ask(server: RunningServer, model: str, image: bool) -> Any:
    picture = base64.b64encode(png_bytes(16, 16, (30, 200, 30))).decode()
    content: list[dict[str, Any]] = [{"type": "text", "text": "What is in this picture?"}]
    if image:
        url = f"data:image/png;base64,{picture}"
        content.append({"type": "image_url", "image_url": {"url": url}})
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0)
    return client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": content}],  # type: ignore[list-item,misc]
        max_tokens=2,
    )


def test_the_console_names_each_pairing(paired: RunningServer) -> None:
    paired.wait_for_output(f"Projector for {SEEING}: mmproj-F16.gguf (vision)")
    assert not any(f"Projector for {BLIND}" in line for line in paired.output)


def test_the_paired_model_reads_an_image_and_counts_its_tokens(paired: RunningServer) -> None:
    text = ask(paired, SEEING, image=False)
    seen = ask(paired, SEEING, image=True)
    assert seen.model == SEEING
    assert seen.usage.prompt_tokens - text.usage.prompt_tokens >= media_tokens_per_image(32, 4)


def test_the_unpaired_model_refuses_an_image(paired: RunningServer) -> None:
    with pytest.raises(openai.BadRequestError, match="image input is not supported") as raised:
        ask(paired, BLIND, image=True)
    assert raised.value.status_code == 400
    assert ask(paired, BLIND, image=False).choices[0].message is not None


def test_api_show_says_which_model_sees(paired: RunningServer) -> None:
    client = ollama.Client(host=paired.base_url)
    assert "vision" in (client.show(SEEING).capabilities or [])
    assert "vision" not in (client.show(BLIND).capabilities or [])
    shown = httpx.post(f"{paired.base_url}/api/show", json={"model": BLIND}).json()
    assert "completion" in shown["capabilities"]
