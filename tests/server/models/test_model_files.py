"""Model files: the header check that refuses broken files in one line, the GGUF metadata Hearth
reports, and the digest cache that hashes a file once."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import ollama
import pytest

from server.models import gguf as gguf_metadata
from server.models.files import ModelFileError, check_gguf_file
from server.models.gguf import GGUFFormatError, file_sha256, gguf_summary
from tests.support.gguf_files import copy_head, write_tiny_gguf
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import ROOT, RunningServer, free_port


@pytest.fixture(autouse=True)
def fresh_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts like a new process, with its own user cache folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    gguf_metadata.clear_caches()
    yield
    gguf_metadata.clear_caches()


def run_server_on(model: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "server", "--skiplauncher", "--model", str(model)]
    return subprocess.run(
        [*command, "--port", str(free_port())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def assert_one_clear_line(
    result: subprocess.CompletedProcess[str], model: Path, problem: str
) -> None:
    output = result.stdout + result.stderr
    lines = [line for line in output.splitlines() if line.strip()]
    assert result.returncode == 2, output
    assert "Traceback" not in output
    assert lines == [f"hearth: {model}: {problem}"], output


# -- the server refuses broken files before llama.cpp sees them ---------------------------------


def test_truncated_copy_of_the_bundled_model_is_refused(bundled: Path, tmp_path: Path) -> None:
    full = bundled.stat().st_size
    model = copy_head(bundled, tmp_path / "cut.gguf", 20_000_000)
    result = run_server_on(model)
    assert_one_clear_line(
        result, model, f"truncated: {full:,} bytes expected, {20_000_000:,} present"
    )


def test_file_that_is_not_a_gguf_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "notes.gguf"
    model.write_text("hello, this is not a model\n")
    result = run_server_on(model)
    assert_one_clear_line(result, model, "not a GGUF file (it starts with b'hello, t')")


def test_header_cut_short_is_refused(bundled: Path, tmp_path: Path) -> None:
    model = copy_head(bundled, tmp_path / "head.gguf", 3000)
    with pytest.raises(ModelFileError) as caught:
        check_gguf_file(model)
    message = str(caught.value)
    assert message.startswith(f"{model}: truncated or corrupt: the header lists 262,144 strings")
    assert "\n" not in message


def test_check_accepts_the_bundled_model(bundled: Path) -> None:
    check_gguf_file(bundled)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "not a GGUF file (it is empty)"),
        (b"GG", "not a GGUF file (it starts with b'GG')"),
        (b"PK\x03\x04\x14\x00\x00\x00zip", "not a GGUF file (it starts with b'PK\\x03\\x04"),
        (b"GGUF\x01\x00\x00\x00" + bytes(16), "GGUF version 1 is not supported"),
        (b"GGUF\x03\x00\x00\x00\x01", "truncated: the header needs at least 16 bytes, 9 present"),
    ],
)
def test_check_names_the_problem(tmp_path: Path, content: bytes, problem: str) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(content)
    with pytest.raises(ModelFileError) as caught:
        check_gguf_file(model)
    assert str(caught.value).startswith(f"{model}: {problem}")


def test_tensor_data_cut_by_a_few_bytes_is_refused(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    summary = gguf_summary(model)
    needed = max(t.offset + (t.n_bytes or 0) for t in summary.tensors)
    copy_head(model, tmp_path / "cut.gguf", needed - 6)
    with pytest.raises(GGUFFormatError, match=f"^truncated: {needed} bytes expected, {needed - 6}"):
        gguf_summary(tmp_path / "cut.gguf")


# -- metadata --------------------------------------------------------------------------------


def test_bundled_model_metadata(bundled: Path) -> None:
    summary = gguf_summary(bundled)
    stat = bundled.stat()
    assert summary.architecture == "gemma3"
    assert summary.quantization == "Q4_K_M"
    assert 260_000_000 < summary.parameter_count < 280_000_000
    assert summary.parameter_size == "268.10M"  # what Ollama shows for gemma3:270m
    assert summary.context_length == summary.metadata["gemma3.context_length"] == 32768
    assert summary.chat_template is None  # this GGUF carries no template
    assert (summary.file_size, summary.mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert summary.metadata["tokenizer.ggml.tokens"] is None  # the vocabulary is skipped


def test_small_gguf_metadata(tmp_path: Path) -> None:
    summary = gguf_summary(write_tiny_gguf(tmp_path / "tiny.gguf"))
    assert summary.architecture == "llama"
    assert summary.parameter_count == 8 * 16 + 4
    assert summary.quantization == "F32"
    assert summary.context_length == 2048
    assert summary.chat_template == "{{ messages }}"


@pytest.mark.parametrize(
    ("count", "label"),
    [(268_098_176, "268.10M"), (7_241_732_096, "7.2B"), (8_000_000_000, "8B"), (1234, "1K")],
)
def test_parameter_size_label_follows_ollama(count: int, label: str) -> None:
    assert gguf_metadata.parameter_size_label(count) == label


# -- the digest cache ------------------------------------------------------------------------


@pytest.fixture
def hash_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    calls: list[Path] = []
    real = gguf_metadata.hash_file

    def counting(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(gguf_metadata, "hash_file", counting)
    return calls


def test_digest_is_hashed_once_and_remembered_beside_the_file(
    tmp_path: Path, hash_calls: list[Path]
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"first version" * 1000)
    expected = hashlib.sha256(model.read_bytes()).hexdigest()
    assert file_sha256(model) == expected
    assert file_sha256(model) == expected
    assert (tmp_path / "m.gguf.sha256.json").is_file()
    gguf_metadata.clear_caches()  # a later start of Hearth
    assert file_sha256(model) == expected
    assert len(hash_calls) == 1


@pytest.mark.parametrize("sidecar", ["not json", '"a string"', "[1, 2]", '{"size": 1}'])
def test_unusable_sidecar_means_hashing_again(
    tmp_path: Path, hash_calls: list[Path], sidecar: str
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"content")
    (tmp_path / "m.gguf.sha256.json").write_text(sidecar)
    assert file_sha256(model) == hashlib.sha256(b"content").hexdigest()
    assert len(hash_calls) == 1


def test_changed_file_is_hashed_again(tmp_path: Path, hash_calls: list[Path]) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"A" * 4096)
    first = file_sha256(model)
    stat = model.stat()
    model.write_bytes(b"B" * 4096)  # same size; a new mtime
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert file_sha256(model) == hashlib.sha256(b"B" * 4096).hexdigest() != first
    assert len(hash_calls) == 2


def test_digest_goes_to_the_user_cache_when_the_folder_is_not_writable(
    tmp_path: Path, hash_calls: list[Path]
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "m.gguf"
    model.write_bytes(b"read-only folder" * 100)
    # Root ignores permissions, so block the sidecar's name instead: a folder cannot be written.
    (folder / "m.gguf.sha256.json").mkdir()
    expected = hashlib.sha256(model.read_bytes()).hexdigest()
    assert file_sha256(model) == expected
    cached = list((tmp_path / "user-cache" / "hearth" / "digests").glob("m.gguf-*.json"))
    assert len(cached) == 1
    gguf_metadata.clear_caches()
    assert file_sha256(model) == expected
    assert len(hash_calls) == 1


# -- the Ollama model endpoints, in process ---------------------------------------------------


class FileBackedEngine(ScriptedEngine):
    """The scripted engine, claiming to have loaded `path`."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._path = path

    @property
    def model_path(self) -> Path | None:
        return self._path


def test_first_digest_is_hashed_off_the_event_loop(
    serve_engine: Callable[..., RunningServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    hashing, release = threading.Event(), threading.Event()
    real = gguf_metadata.hash_file

    def slow_hash(path: Path) -> str:
        hashing.set()
        release.wait(30)
        return real(path)

    monkeypatch.setattr(gguf_metadata, "hash_file", slow_hash)
    server = serve_engine(FileBackedEngine(model))
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.get, f"{server.base_url}/api/tags", timeout=30)
        try:
            assert hashing.wait(10), "/api/tags never hashed the model file"
            # The hash is still running, yet the server answers.
            assert httpx.get(f"{server.base_url}/api/extra/version", timeout=5).status_code == 200
        finally:
            release.set()
        (entry,) = pending.result().json()["models"]
    assert entry["digest"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert entry["size"] == model.stat().st_size
    assert entry["details"]["family"] == "llama"
    assert entry["details"]["quantization_level"] == "F32"


def test_show_sends_the_gguf_chat_template(
    serve_engine: Callable[..., RunningServer], tmp_path: Path
) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf", chat_template="{{ bos_token }}{{ x }}")
    server = serve_engine(FileBackedEngine(model))
    shown = ollama.Client(host=server.base_url).show("scripted")
    assert shown.template == "{{ bos_token }}{{ x }}"
    info = shown.modelinfo or {}
    assert info["llama.context_length"] == 2048
    assert "tokenizer.chat_template" not in info


def test_model_endpoints_without_a_file_stay_parseable(
    serve_engine: Callable[..., RunningServer],
) -> None:
    server = serve_engine(ScriptedEngine())
    client = ollama.Client(host=server.base_url)
    (listed,) = client.list().models
    assert (listed.size, listed.digest, listed.modified_at) == (0, "", None)
    assert listed.details is not None and listed.details.family == ""
    shown = client.show("scripted")
    assert shown.modelinfo == {} and shown.template == ""
    (running,) = client.ps().models
    assert running.expires_at is not None
    assert running.expires_at - datetime.now(UTC) > timedelta(days=365 * 290)
