"""--pooling (llama-server's) on the bundled model: `last` and `none` on the real server, beside
the session's default server (the model declares no pooling: the mean), and `cls` in-process on
the embedder itself (server/core/llama/embedding/embedder.py), which needs no server of its own.

`none` pools nothing: llama-server's /embeddings answers each token's raw output vector, and
the routes whose answer is one vector per input (OpenAI's, Ollama's, KoboldCpp's) refuse with
llama-server's 400. The pooled kinds are checked against those raw vectors: `last` is the last
token's, scaled to unit length, and `cls` the first token's.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence

import httpx
import llama_cpp as llama
import pytest

from server.core.llama.embedding.embedder import Embedder
from server.core.llama.loading.model import Vocabulary
from server.core.load_settings import LoadSettings
from server.core.types import EmbeddingsEvent, GenerationRequest
from server.dialects.embedding.embeddings import NOT_POOLED
from server.models.files import resolve_model_path
from tests.support.error_shapes import assert_error_shape
from tests.support.servers import RunningServer

StartHearth = Callable[..., RunningServer]
Vector = Sequence[float]
TEXT = "The lighthouse keeper lit the lamp."
# The same text through two servers, or two contexts, decoded in batches of the same shape:
# the numerics may still differ a little (threads, kernels); different poolings of this text
# lie more than 0.1 apart.
TOLERANCE = 1e-3


def unit(vector: Vector) -> list[float]:
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector]


def largest_difference(first: Vector, second: Vector) -> float:
    assert len(first) == len(second)
    return max(abs(a - b) for a, b in zip(first, second, strict=True))


def token_count(server: RunningServer, text: str) -> int:
    """The model's tokens for `text` with its special ones (BOS), as /tokenize counts them."""
    answer = httpx.post(
        f"{server.base_url}/tokenize", json={"content": text, "add_special": True}, timeout=60
    )
    assert answer.status_code == 200
    return len(answer.json()["tokens"])


@pytest.fixture(scope="module")
def unpooled(start_hearth: StartHearth) -> RunningServer:
    return start_hearth(["--pooling", "none"])


@pytest.fixture(scope="module")
def last_pooled(start_hearth: StartHearth) -> RunningServer:
    return start_hearth(["--pooling", "last"])


def token_vectors(server: RunningServer, texts: list[str]) -> list[list[list[float]]]:
    answer = httpx.post(f"{server.base_url}/embeddings", json={"input": texts}, timeout=60)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [item["index"] for item in body] == list(range(len(texts)))
    return [item["embedding"] for item in body]


def test_no_pooling_answers_each_token_s_raw_vector(unpooled: RunningServer) -> None:
    texts = ["hello hello hello", TEXT]
    per_input = token_vectors(unpooled, texts)
    assert [len(tokens) for tokens in per_input] == [token_count(unpooled, t) for t in texts]
    assert len(per_input[0]) == 4  # BOS and three words on this vocabulary
    size = len(per_input[0][0])
    assert size > 1 and all(len(vector) == size for tokens in per_input for vector in tokens)
    # The model's hidden state as it is: not scaled to unit length.
    norms = [math.sqrt(sum(v * v for v in vector)) for tokens in per_input for vector in tokens]
    assert all(abs(norm - 1.0) > 0.5 for norm in norms)
    # Each input's tokens are its own: the same text gives the same vectors in another batch.
    alone = token_vectors(unpooled, [TEXT])[0]
    for first, second in zip(alone, per_input[1], strict=True):
        assert largest_difference(unit(first), unit(second)) < TOLERANCE


def test_no_pooling_is_refused_where_one_vector_per_input_is_the_answer(
    unpooled: RunningServer,
) -> None:
    for path, body in [
        ("/v1/embeddings", {"input": TEXT}),
        ("/api/embed", {"model": "any", "input": TEXT}),
        ("/api/embeddings", {"model": "any", "prompt": TEXT}),
        ("/api/extra/embeddings", {"input": [TEXT]}),
    ]:
        refused = httpx.post(f"{unpooled.base_url}{path}", json=body, timeout=60)
        assert refused.status_code == 400, (path, refused.text)
        assert_error_shape(path, refused.json())
        assert NOT_POOLED in refused.text
    openai_error = httpx.post(f"{unpooled.base_url}/v1/embeddings", json={"input": TEXT}).json()
    assert openai_error["error"]["type"] == "invalid_request_error"


def test_last_token_pooling_is_the_last_token_s_output_scaled(
    last_pooled: RunningServer, unpooled: RunningServer, hearth: RunningServer
) -> None:
    def pooled(server: RunningServer) -> list[float]:
        answer = httpx.post(f"{server.base_url}/v1/embeddings", json={"input": TEXT}, timeout=60)
        assert answer.status_code == 200, answer.text
        vector: list[float] = answer.json()["data"][0]["embedding"]
        return vector

    last, mean = pooled(last_pooled), pooled(hearth)
    assert math.sqrt(sum(value * value for value in last)) == pytest.approx(1.0, abs=1e-4)
    assert largest_difference(last, mean) > 100 * TOLERANCE  # not the default mean
    last_token = token_vectors(unpooled, [TEXT])[0][-1]
    assert largest_difference(last, unit(last_token)) < TOLERANCE
    # llama-server's own /embeddings answers a pooled server in the OpenAI shape, as before.
    native = httpx.post(f"{last_pooled.base_url}/embeddings", json={"input": TEXT}, timeout=60)
    assert largest_difference(native.json()["data"][0]["embedding"], last) < TOLERANCE


@pytest.fixture(scope="module")
def bundled_vocabulary() -> Iterator[Vocabulary]:
    """The bundled model loaded in this process, on the CPU."""
    path = resolve_model_path(None)
    llama.llama_backend_init()
    params = llama.llama_model_default_params()
    params.n_gpu_layers = 0
    model = llama.llama_model_load_from_file(str(path).encode(), params)
    assert model
    yield Vocabulary(model, path)
    llama.llama_model_free(model)


def embedded(
    bundled_vocabulary: Vocabulary, pooling: str | None, texts: tuple[str, ...]
) -> EmbeddingsEvent:
    embedder = Embedder.on_model(bundled_vocabulary, LoadSettings(pooling=pooling))
    try:
        request = GenerationRequest("pooling", "", max_tokens=1, embed_inputs=texts)
        events = list(embedder.embed(request, threading.Event()))
    finally:
        embedder.close()
    assert isinstance(events[0], EmbeddingsEvent)
    return events[0]


@pytest.mark.model
def test_cls_pooling_is_the_first_token_s_output_scaled(bundled_vocabulary: Vocabulary) -> None:
    texts = ("hello hello hello", TEXT)
    first = embedded(bundled_vocabulary, "cls", texts)
    raw = embedded(bundled_vocabulary, "none", texts)
    mean = embedded(bundled_vocabulary, None, texts)
    assert raw.vectors == () and raw.token_vectors is not None
    assert [len(tokens) for tokens in raw.token_vectors] == list(raw.token_counts)
    for index, tokens in enumerate(raw.token_vectors):
        assert largest_difference(first.vectors[index], unit(tokens[0])) < TOLERANCE
        assert largest_difference(first.vectors[index], mean.vectors[index]) > 100 * TOLERANCE
