"""Ollama's embedding endpoints: POST /api/embed and the legacy POST /api/embeddings.

https://github.com/ollama/ollama/blob/main/docs/api.md#generate-embeddings. As in Ollama, an
empty input only loads the model (unloads it with keep_alive 0) and answers no vectors, and
`truncate` (default true) cuts an input longer than the model takes instead of refusing it.
The legacy endpoint embeds one `prompt`; unlike Ollama's, its vector is normalised too, so
both endpoints give the same vector for the same text.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field
from typing_extensions import TypedDict

from server.core.types import EmbedInput
from server.dialects.edge.errors import Dialect
from server.dialects.edge.limits import C_INT_MAX
from server.dialects.embedding.embeddings import Embedded, EmbeddingAsk, embedding_route
from server.dialects.ollama.schemas import KeepsAlive, OllamaOptions

router = APIRouter(tags=["Ollama"])
OLLAMA = Dialect.OLLAMA
_NANOSECONDS = 1_000_000_000


class OllamaEmbedRequest(KeepsAlive):
    """POST /api/embed. `options` is accepted; none of its fields changes an embedding."""

    model: str
    input: str | list[str] = ""
    truncate: bool = True
    options: OllamaOptions = Field(default_factory=OllamaOptions)
    dimensions: int | None = Field(default=None, ge=1, le=C_INT_MAX)


class OllamaEmbeddingsRequest(KeepsAlive):
    """POST /api/embeddings (superseded by /api/embed in Ollama, still used by clients)."""

    model: str
    prompt: str = ""
    options: OllamaOptions = Field(default_factory=OllamaOptions)


class EmbedResponse(TypedDict):
    """/api/embed; durations in nanoseconds."""

    model: str
    embeddings: list[list[float]]
    total_duration: int
    load_duration: int
    prompt_eval_count: int


class EmbeddingResponse(TypedDict):
    """/api/embeddings."""

    embedding: list[float]


def _embed_answer(embedded: Embedded) -> EmbedResponse:
    return {
        "model": embedded.model,
        "embeddings": [list(vector) for vector in embedded.vectors],
        "total_duration": int(embedded.seconds * _NANOSECONDS),
        "load_duration": 0,  # a model switch, if any, is counted in total_duration
        "prompt_eval_count": embedded.prompt_tokens,
    }


def _nothing_embedded(model: str) -> EmbedResponse:
    return {
        "model": model,
        "embeddings": [],
        "total_duration": 0,
        "load_duration": 0,
        "prompt_eval_count": 0,
    }


@embedding_route(router, "/api/embed", OllamaEmbedRequest, EmbedResponse, OLLAMA)
def embed(body: OllamaEmbedRequest) -> EmbeddingAsk:
    inputs: list[EmbedInput] = [body.input] if isinstance(body.input, str) else [*body.input]
    return EmbeddingAsk(
        inputs,
        body.model,
        truncate=body.truncate,
        id_prefix="embed-",
        answer=_embed_answer,
        keep_alive=body.keep_alive,
        dimensions=body.dimensions,
        model_only_answer=_nothing_embedded if not inputs or inputs == [""] else None,
    )


@embedding_route(router, "/api/embeddings", OllamaEmbeddingsRequest, EmbeddingResponse, OLLAMA)
def embeddings(body: OllamaEmbeddingsRequest) -> EmbeddingAsk:
    return EmbeddingAsk(
        [body.prompt],
        body.model,
        truncate=True,
        id_prefix="embed-",
        answer=lambda embedded: {"embedding": list(embedded.vectors[0])},
        keep_alive=body.keep_alive,
        model_only_answer=None if body.prompt else lambda _model: {"embedding": []},
    )
