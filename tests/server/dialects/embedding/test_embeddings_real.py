"""Embeddings on the real server and the bundled model, with the official `openai` and `ollama`
clients (raw HTTP for KoboldCpp's and llama-server's routes): from the chat model, and from a
separate --embeddingsmodel file. Wire shapes and errors in detail: tests/server/dialects/
test_embeddings_scripted.py."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import ollama
import openai
import pytest

from server.models.files import resolve_model_path
from server.models.gguf import gguf_summary
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from tests.support.error_shapes import assert_error_shape
from tests.support.servers import ROOT, RunningServer, free_port

StartHearth = Callable[[Sequence[str]], RunningServer]
Vector = Sequence[float]
TEXTS = ["The lighthouse keeper lit the lamp.", "Quarterly revenue grew by four percent."]
BUSY = {"detail": {"msg": "Server is busy; please try again later.", "type": "service_unavailable"}}
# One text's vector embedded alone or with others (another decode shape): on some CPUs the
# matmul kernels, and so the numerics, depend on the number of rows. Measured on the bundled
# model, another kernel (weight repacking on against off) moves a unit vector's components by
# up to 0.01; the different texts embedded here lie at least 0.13 apart.
ACROSS_SHAPES = 0.03


def embedding_size() -> int:
    """The bundled model's embedding length, from its GGUF header."""
    size = gguf_summary(resolve_model_path(None)).architecture_number("embedding_length")
    assert size is not None
    return size


def assert_same(first: Vector, second: Vector, tolerance: float) -> None:
    assert len(first) == len(second)
    assert max(abs(a - b) for a, b in zip(first, second, strict=True)) < tolerance


def assert_unit(vector: Vector) -> None:
    assert len(vector) == embedding_size()
    assert math.sqrt(sum(value * value for value in vector)) == pytest.approx(1.0, abs=1e-4)


def cosine(first: Vector, second: Vector) -> float:
    return sum(a * b for a, b in zip(first, second, strict=True))


def test_openai_client_embeds_strings_and_lists(hearth: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{hearth.base_url}/v1", api_key="unused")
    # The client asks for base64 by default and decodes it; "float" is the JSON list.
    single = client.embeddings.create(model="any", input=TEXTS[0]).data[0].embedding
    again = (
        client.embeddings.create(model="any", input=TEXTS[0], encoding_format="float")
        .data[0]
        .embedding
    )
    both = client.embeddings.create(model="any", input=TEXTS)
    assert_unit(single)
    assert_same(single, again, 1e-5)
    assert [item.index for item in both.data] == [0, 1]
    first, second = (item.embedding for item in both.data)
    assert_same(first, single, ACROSS_SHAPES)  # batched with another input, or alone
    assert cosine(first, second) < 0.999  # different texts differ
    assert both.usage.prompt_tokens == both.usage.total_tokens > 2
    assert both.model == "gemma-3-270m-q4_k_m"


def test_several_inputs_are_embedded_in_one_decode(hearth: RunningServer) -> None:
    before = len(hearth.output)
    # Texts far apart (≥ 0.13), so that a vector given to the wrong input shows beyond the
    # tolerance ("Note number 2…" and "…3…" would lie 0.008 apart).
    texts = [
        "A note about the sea.",
        "Bread needs flour, water and salt.",
        "The stock market fell sharply today.",
        "My cat sleeps all afternoon.",
        "Rain is expected tomorrow in the hills.",
    ]
    answer = httpx.post(f"{hearth.base_url}/embeddings", json={"input": texts}, timeout=60)
    assert answer.status_code == 200
    vectors = [item["embedding"] for item in answer.json()["data"]]
    line = hearth.wait_for_output("] embedded 5 inputs", after=before)
    assert "in 1 decode," in line
    alone = httpx.post(f"{hearth.base_url}/v1/embeddings", json={"input": texts[3]}, timeout=60)
    assert_same(alone.json()["data"][0]["embedding"], vectors[3], ACROSS_SHAPES)


def test_ollama_client_embed_and_legacy_embeddings(hearth: RunningServer) -> None:
    client = ollama.Client(host=hearth.base_url)
    embedded = client.embed(model="gemma-3-270m-q4_k_m", input=TEXTS)
    legacy = client.embeddings(model="gemma-3-270m-q4_k_m", prompt=TEXTS[1])
    assert len(embedded.embeddings) == 2 and embedded.prompt_eval_count
    for vector in embedded.embeddings:
        assert_unit(vector)
    assert_same(legacy.embedding, embedded.embeddings[1], ACROSS_SHAPES)  # alone, batched
    assert cosine(*embedded.embeddings) < 0.999
    assert client.embed(model="gemma-3-270m-q4_k_m", input=[]).embeddings == []  # a load


def test_kobold_route_and_bad_requests(hearth: RunningServer) -> None:
    base = hearth.base_url
    kobold = httpx.post(f"{base}/api/extra/embeddings", json={"input": [TEXTS[0]]}, timeout=60)
    assert kobold.status_code == 200
    assert_unit(kobold.json()["data"][0]["embedding"])
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused")
    with pytest.raises(openai.BadRequestError) as resized:
        client.embeddings.create(model="any", input="x", dimensions=8)
    assert f"of {embedding_size()} dimensions" in resized.value.message
    for path, body in [
        ("/v1/embeddings", {"input": []}),
        ("/v1/embeddings", {"input": [{"text": "x"}]}),
        ("/v1/embeddings", {"input": [[10**9]]}),  # no such token
        ("/api/extra/embeddings", {"input": ""}),
        ("/api/embed", {"model": "m", "input": [1]}),
    ]:
        refused = httpx.post(f"{base}{path}", json=body, timeout=60)
        assert refused.status_code == 400, (path, refused.text)
        assert_error_shape(path, refused.json())


def test_a_separate_embeddings_model_and_the_queue_rules(
    start_hearth: StartHearth, tmp_path: Path
) -> None:
    """--embeddingsmodel (a link to the bundled file, so answers name it "embedder") serves
    every embedding request and never unloads the chat model; --multiuser 0 refuses an
    embedding request while a generation runs."""
    link = tmp_path / "embedder.gguf"
    link.symlink_to(resolve_model_path(None))
    server = start_hearth(["--embeddingsmodel", str(link), "--multiuser", "0"])
    client = ollama.Client(host=server.base_url)
    embedded = client.embed(model="not-a-listed-name", input=TEXTS[0], keep_alive=0)
    assert embedded.model == "embedder"
    assert_unit(embedded.embeddings[0])
    assert [model.model for model in client.ps().models] == ["gemma-3-270m-q4_k_m:latest"]
    with (
        httpx.Client(base_url=server.base_url, timeout=60) as http,
        http.stream(
            "POST", "/api/extra/generate/stream", json={"prompt": "Once", "max_length": 400}
        ) as running,
    ):
        lines = running.iter_lines()  # kept: dropping the iterator would close the stream
        next(lines)
        refused = http.post("/v1/embeddings", json={"input": "x"})
        assert (refused.status_code, refused.json()) == (503, BUSY)
        http.post("/api/extra/abort", json={})
    deadline = time.monotonic() + 30
    while httpx.get(f"{server.base_url}/api/extra/perf").json()["idle"] != 1:
        assert time.monotonic() < deadline, "the aborted generation never ended"
        time.sleep(0.05)  # polling for the queue to empty, not a timed assertion
    kobold = httpx.post(
        f"{server.base_url}/api/extra/embeddings", json={"input": TEXTS[0]}, timeout=60
    )
    assert kobold.json()["model"] == "embedder"
    assert_same(kobold.json()["data"][0]["embedding"], embedded.embeddings[0], 1e-5)


def test_a_missing_or_broken_embeddings_model_stops_the_start(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_text("not a model")
    command = [sys.executable, "-m", "server", "--skiplauncher", "--port", str(free_port())]
    for path, problem in [(tmp_path / "none.gguf", "no such model file"), (broken, "GGUF")]:
        finished = subprocess.run(
            [*command, "--embeddingsmodel", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert finished.returncode == 2
        output = finished.stdout + finished.stderr
        assert str(path) in output and problem in output


def test_embeddingsmodel_in_kcpps_files_and_on_the_command_line(tmp_path: Path) -> None:
    assert HearthSettings.model_validate({"embeddingsmodel": ""}).embeddingsmodel is None
    given = parse_command_line(["--embeddingsmodel", "nomic.gguf"]).settings
    assert given.embeddingsmodel == "nomic.gguf"
    assert given.to_kcpps()["embeddingsmodel"] == "nomic.gguf"
