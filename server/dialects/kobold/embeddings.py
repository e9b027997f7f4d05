"""KoboldCpp's POST /api/extra/embeddings: OpenAI's request and answer, with `truncate`.

KoboldCpp mirrors /v1/embeddings here (server/dialects/embedding/embedding_shapes.py); `truncate`
(default true, as KoboldCpp's) cuts an input longer than the model takes instead of refusing
it. Where KoboldCpp answers an empty input with an empty list, Hearth answers 400, and errors
are in KoboldCpp's `{"detail": {...}}` shape.
"""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter

from server.dialects.edge.errors import Dialect
from server.dialects.embedding.embedding_shapes import (
    EmbeddingList,
    OpenAIEmbeddingRequest,
    embedding_inputs,
    embedding_list,
)
from server.dialects.embedding.embeddings import EmbeddingAsk, embedding_route

router = APIRouter(tags=["KoboldAI"])


class KoboldEmbeddingRequest(OpenAIEmbeddingRequest):
    """POST /api/extra/embeddings."""

    truncate: bool = True


@embedding_route(
    router, "/api/extra/embeddings", KoboldEmbeddingRequest, EmbeddingList, Dialect.KOBOLD
)
def embeddings(body: KoboldEmbeddingRequest) -> EmbeddingAsk:
    return EmbeddingAsk(
        embedding_inputs(body.input),
        body.model,
        truncate=body.truncate,
        id_prefix="kai-embd-",
        answer=partial(embedding_list, encoding=body.encoding_format),
        dimensions=body.dimensions,
    )
