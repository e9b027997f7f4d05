"""OpenAI's embeddings endpoint: POST /v1/embeddings, and /embeddings as llama-server serves it.

The request and answer shapes are server/dialects/embedding/embedding_shapes.py (KoboldCpp answers
in them too); `dimensions` other than the model's own size is a 400
(EmbeddingRoute.check_dimensions).

With --pooling none, /embeddings answers as llama-server's does, a list of
`{"index": i, "embedding": [[...token 1...], [...token 2...], ...]}` with each token's raw
vector, and /v1/embeddings refuses with llama-server's 400
(server/dialects/embedding/embeddings.py).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from fastapi import APIRouter
from pydantic import RootModel
from typing_extensions import TypedDict

from server.dialects.edge.errors import Dialect
from server.dialects.embedding.embedding_shapes import (
    EmbeddingList,
    OpenAIEmbeddingRequest,
    embedding_inputs,
    embedding_list,
)
from server.dialects.embedding.embeddings import Embedded, EmbeddingAsk, embedding_route

router = APIRouter(tags=["OpenAI"])


class TokenEmbeddings(TypedDict):
    """One input of llama-server's /embeddings answer with --pooling none."""

    index: int
    embedding: list[list[float]]  # each token's output vector, raw, in order


class LlamaServerEmbeddings(RootModel[EmbeddingList | list[TokenEmbeddings]]):
    """The answer of /embeddings: OpenAI's list, or with --pooling none each token's vector."""


def embeddings(body: OpenAIEmbeddingRequest) -> EmbeddingAsk:
    return EmbeddingAsk(
        embedding_inputs(body.input),
        body.model,
        truncate=False,
        id_prefix="embd-",
        answer=partial(embedding_list, encoding=body.encoding_format),
        dimensions=body.dimensions,
    )


def per_token_list(embedded: Embedded) -> list[TokenEmbeddings]:
    return [
        {"index": index, "embedding": [list(vector) for vector in tokens]}
        for index, tokens in enumerate(embedded.token_vectors or ())
    ]


def llama_server_embeddings(body: OpenAIEmbeddingRequest) -> EmbeddingAsk:
    """/embeddings: as /v1/embeddings, and each token's vector when nothing is pooled."""
    return replace(embeddings(body), per_token_answer=per_token_list)


embedding_route(
    router,
    "/v1/embeddings",
    OpenAIEmbeddingRequest,
    EmbeddingList,
    Dialect.OPENAI,
    name="embeddings_v1_embeddings",
)(embeddings)
embedding_route(
    router,
    "/embeddings",
    OpenAIEmbeddingRequest,
    LlamaServerEmbeddings,
    Dialect.OPENAI,
    name="embeddings_embeddings",
)(llama_server_embeddings)
