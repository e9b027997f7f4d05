"""llama-server's `--media-path`: `file://` image URLs read from that folder and nowhere else
(server/dialects/media/local_media.py), on the real model with a tiny projector, through the
official OpenAI client. Without the flag such a URL is refused (the session's `seeing` server).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from tests.server.conftest import StartHearth
from tests.support.projector_gguf import media_tokens_per_image, png_bytes, write_projector
from tests.support.servers import RunningServer

PER_IMAGE = media_tokens_per_image(32, 4)


@pytest.fixture(scope="module")
def media_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("media")
    (root / "pictures").mkdir()
    (root / "pictures" / "red.png").write_bytes(png_bytes(16, 16, (220, 30, 30)))
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.png").write_bytes(png_bytes(16, 16, (20, 40, 230)))
    (root / "link.png").symlink_to(outside / "secret.png")
    (root / "notes.txt").write_text("not an image")
    return root


@pytest.fixture(scope="module")
def reading(start_hearth: StartHearth, bundled: Path, media_folder: Path) -> RunningServer:
    projector = write_projector(media_folder.parent / "tiny-mmproj.gguf", bundled)
    return start_hearth(
        ["--mmproj", str(projector), "--contextsize", "2048", "--media-path", str(media_folder)]
    )


def ask(server: RunningServer, url: str) -> Any:
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0)
    return client.chat.completions.create(
        model="any",
        max_tokens=1,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            }
        ],  # type: ignore[list-item]
    )


@pytest.mark.model
def test_a_file_url_under_the_media_folder_is_read_as_the_image(reading: RunningServer) -> None:
    answer = ask(reading, "file://pictures/red.png")
    same = ask(reading, "file:////pictures//red.png")  # llama-server's spelling of the same
    assert answer.usage.prompt_tokens >= PER_IMAGE
    assert same.usage.prompt_tokens == answer.usage.prompt_tokens


@pytest.mark.model
@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("file://pictures/missing.png", "is not in the media folder"),
        ("file://../outside/secret.png", "must name a file inside the media folder"),
        ("file://pictures/../link.png", "must name a file inside the media folder"),
        ("file://link.png", "leads out of the media folder"),
        ("file://pictures", "does not name a file"),
        ("file://notes.txt", "is not an image"),
    ],
)
def test_what_is_not_an_image_inside_the_folder_is_a_400(
    reading: RunningServer, url: str, says: str
) -> None:
    with pytest.raises(openai.BadRequestError, match=says):
        ask(reading, url)


@pytest.mark.model
def test_without_a_media_folder_a_file_url_is_refused(seeing: RunningServer) -> None:
    with pytest.raises(openai.BadRequestError, match="is not a data: URI"):
        ask(seeing, "file://pictures/red.png")
