"""Ollama's model endpoints (/api/tags, /api/show, /api/ps) report the real GGUF file, as read by
the official ollama client: size, modification time, SHA-256 digest and the model's metadata."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import ollama
import pytest
from ollama._types import ModelDetails

from server.models.gguf import mtime_datetime
from tests.support.servers import RunningServer


@pytest.fixture(scope="module")
def file_digest(bundled: Path) -> str:
    with open(bundled, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def check_details(details: ModelDetails | None) -> None:
    assert details is not None
    assert details.format == "gguf"
    assert details.family == "gemma3"
    assert list(details.families or []) == ["gemma3"]
    assert details.parameter_size == "268.10M"
    assert details.quantization_level == "Q4_K_M"


def test_tags_report_the_file(llama: ollama.Client, bundled: Path, file_digest: str) -> None:
    (entry,) = llama.list().models
    stat = bundled.stat()
    assert entry.model == "gemma-3-270m-q4_k_m:latest"
    assert entry.size == stat.st_size
    assert entry.digest == file_digest
    assert entry.modified_at == mtime_datetime(stat.st_mtime_ns)
    check_details(entry.details)


def test_show_reports_the_metadata(llama: ollama.Client, bundled: Path) -> None:
    shown = llama.show("hearth")
    check_details(shown.details)
    info = shown.modelinfo or {}
    assert info["general.architecture"] == "gemma3"
    assert info["gemma3.context_length"] == 32768  # trained context, from the GGUF
    assert 260_000_000 < info["general.parameter_count"] < 280_000_000
    assert info["tokenizer.ggml.tokens"] is None  # the vocabulary is not sent
    assert shown.template == ""  # this GGUF has no chat template
    assert {"completion", "tools"} <= set(shown.capabilities or [])
    assert shown.modified_at == mtime_datetime(bundled.stat().st_mtime_ns)


def test_ps_reports_a_model_that_never_unloads(
    llama: ollama.Client, bundled: Path, file_digest: str
) -> None:
    (entry,) = llama.ps().models
    assert entry.size == bundled.stat().st_size
    assert entry.size_vram == 0
    assert entry.digest == file_digest
    assert entry.context_length == 4096  # what the fixture loaded, not the trained 32768
    check_details(entry.details)
    # Ollama's keep_alive < 0: now + Go's longest duration (~292 years), "Forever" in `ollama ps`.
    assert entry.expires_at is not None
    assert entry.expires_at - datetime.now(UTC) > timedelta(days=365 * 290)


def test_times_are_rfc3339_utc(hearth: RunningServer) -> None:
    with hearth.client() as client:
        tags = client.get("/api/tags").json()["models"][0]
        running = client.get("/api/ps").json()["models"][0]
        shown = client.post("/api/show", json={"model": "hearth"}).json()
    for text in (tags["modified_at"], running["modified_at"], running["expires_at"]):
        assert text.endswith("Z") and datetime.fromisoformat(text).tzinfo is not None
    assert shown["modified_at"] == tags["modified_at"]
