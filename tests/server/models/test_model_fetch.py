"""Models from the network (`--hf`, model URLs) against a local stand-in for the Hugging Face Hub
(tests/hub_server.py; HF_ENDPOINT points at it): picking the quantization, downloading with
progress, resuming a broken download, the cache making later starts request nothing, and each
failure as one sentence. The last test runs the real server on a downloaded model."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from huggingface_hub import constants

from server.models.fetch import (
    model_for,
    parse_hf_spec,
    parse_hub_url,
    pick_quant_file,
)
from server.models.files import ModelFileError
from server.settings.config import HearthSettings
from tests.support.hub_server import MODEL_FILE, REPO, LocalHub
from tests.support.servers import RunningServer, free_port


def sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@functools.cache
def bundled_sha256(bundled: Path) -> str:
    """The bundled model's digest, computed once (a 250 MB read) for every download compared."""
    return sha256(bundled)


def test_references_are_read_as_llama_server_and_koboldcpp_write_them() -> None:
    assert parse_hf_spec("bartowski/gemma-GGUF") == ("bartowski/gemma-GGUF", "Q4_K_M")
    assert parse_hf_spec("hf.co/bartowski/gemma-GGUF:q8_0") == ("bartowski/gemma-GGUF", "Q8_0")
    with pytest.raises(ModelFileError, match="expected owner/repo"):
        parse_hf_spec("not a repo")
    assert parse_hub_url("https://huggingface.co/o/r/resolve/main/sub/m-Q4_K_M.gguf") == (
        "o/r",
        "sub/m-Q4_K_M.gguf",
        "main",
    )
    assert parse_hub_url("https://huggingface.co/o/r/blob/abc123/m.gguf") == (
        "o/r",
        "m.gguf",
        "abc123",
    )
    assert parse_hub_url("https://example.com/o/r/resolve/main/m.gguf") is None


def test_the_quantization_picks_one_file_or_every_part_of_a_split_model() -> None:
    files = [
        "README.md",
        "m-Q4_K_M.gguf",
        "m-Q4_K_S.gguf",
        "m-Q8_0.gguf",
        "mmproj-m-Q4_K_M.gguf",
        "big/m-Q4_K_M-00002-of-00002.gguf",
        "big/m-Q4_K_M-00001-of-00002.gguf",
    ]
    assert pick_quant_file(files, "Q4_K_M", "o/r") == ["m-Q4_K_M.gguf"]
    assert pick_quant_file(files, "q8_0", "o/r") == ["m-Q8_0.gguf"]
    split = [name for name in files if name.startswith("big/")]
    assert pick_quant_file(split, "Q4_K_M", "o/r") == [
        "big/m-Q4_K_M-00001-of-00002.gguf",
        "big/m-Q4_K_M-00002-of-00002.gguf",
    ]
    with pytest.raises(
        ModelFileError, match=r"o/r has no Q2_K GGUF file \(it has: Q4_K_M, Q4_K_S, Q8_0\)"
    ):
        pick_quant_file(files, "Q2_K", "o/r")


def test_hf_downloads_once_with_progress_then_comes_from_the_cache(
    hub: LocalHub, bundled: Path
) -> None:
    seen: list[tuple[int, int | None]] = []
    path = model_for(HearthSettings(hf=REPO), lambda done, total: seen.append((done, total)))
    assert path.name == MODEL_FILE and sha256(path) == bundled_sha256(bundled)
    size = bundled.stat().st_size
    assert seen and seen[-1] == (size, size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    asked = len(hub.requests)
    assert model_for(HearthSettings(hf=REPO)) == path
    assert len(hub.requests) == asked  # a second start makes no request at all
    url = f"https://huggingface.co/{REPO}/resolve/main/{MODEL_FILE}"
    assert model_for(HearthSettings(model_param=url)) == path
    assert len(hub.requests) == asked


def test_a_broken_hub_download_resumes_where_it_stopped(hub: LocalHub, bundled: Path) -> None:
    cut = 40 * 2**20
    hub.cut_after[MODEL_FILE] = cut
    try:
        path = model_for(HearthSettings(hf=REPO))
    except ModelFileError:
        path = model_for(HearthSettings(hf=REPO))  # a second start resumes
    assert sha256(path) == bundled_sha256(bundled)
    ranges = [r.range for r in hub.downloads_of(MODEL_FILE)]
    assert ranges[0] is None and len(ranges) == 2
    assert ranges[1] is not None and ranges[1].startswith("bytes=")
    resumed_at = int(ranges[1].removeprefix("bytes=").split("-")[0])
    assert 0 < resumed_at <= cut  # only the missing bytes were sent again


def test_any_url_downloads_resumably_into_the_cache(hub: LocalHub, bundled: Path) -> None:
    url = f"{hub.url}/files/{MODEL_FILE}"
    cut = 64 * 2**20
    hub.cut_after[MODEL_FILE] = cut
    path = model_for(HearthSettings(model_param=url))
    assert sha256(path) == bundled_sha256(bundled)
    ranges = [r.range for r in hub.downloads_of(MODEL_FILE)]
    assert ranges == [None, f"bytes={cut}-"]
    asked = len(hub.requests)
    assert model_for(HearthSettings(model_param=url)) == path
    assert len(hub.requests) == asked


def test_failures_are_one_sentence(hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = {
        "hearth-test/gated-GGUF": "hearth-test/gated-GGUF is gated: accept its terms",
        "hearth-test/missing-GGUF": "hearth-test/missing-GGUF: no such repository",
        f"{REPO}:Q2_K": f"{REPO} has no Q2_K GGUF file (it has: Q4_K_M, Q8_0)",
    }
    for spec, message in cases.items():
        with pytest.raises(ModelFileError) as raised:
            model_for(HearthSettings(hf=spec))
        assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    with pytest.raises(ModelFileError, match="answered HTTP 404"):
        model_for(HearthSettings(model_param=f"{hub.url}/files/nothing.gguf"))
    closed = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    with pytest.raises(ModelFileError, match="cannot reach"):
        model_for(HearthSettings(hf="someone/other-GGUF"))


def test_the_server_serves_a_model_named_by_hf(
    hub: LocalHub, tmp_path: Path, start_hearth: Callable[..., RunningServer]
) -> None:
    env = {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "served")}
    server = start_hearth(["--hf", f"{REPO}:Q4_K_M"], env=env)
    server.wait_for_output("Downloading: 100%")
    answer = httpx.post(
        f"{server.base_url}/api/v1/generate", json={"prompt": "Hello", "max_length": 4}, timeout=60
    )
    assert answer.status_code == 200 and answer.json()["results"][0]["text"]
    assert (
        httpx.get(f"{server.base_url}/api/v1/model")
        .json()["result"]
        .endswith("gemma-3-270m-Q4_K_M")
    )
