"""OpenAI's embeddings endpoint: POST /v1/embeddings, and /embeddings as llama-server serves it.

The request and answer shapes are server/dialects/embedding_shapes.py (KoboldCpp answers in
them too); `dimensions` other than the model's own size is a 400
(EmbeddingRoute.check_dimensions).
"""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter

from server.dialects.embedding_shapes import (
    EmbeddingList,
    OpenAIEmbeddingRequest,
    embedding_inputs,
    embedding_list,
)
from server.dialects.embeddings import EmbeddingAsk, embedding_route
from server.dialects.errors import Dialect

router = APIRouter(tags=["OpenAI"])


def embeddings(body: OpenAIEmbeddingRequest) -> EmbeddingAsk:
    return EmbeddingAsk(
        embedding_inputs(body.input),
        body.model,
        truncate=False,
        id_prefix="embd-",
        answer=partial(embedding_list, encoding=body.encoding_format),
        dimensions=body.dimensions,
    )


for _path in ("/v1/embeddings", "/embeddings"):  # the second is llama-server's
    embedding_route(
        router,
        _path,
        OpenAIEmbeddingRequest,
        EmbeddingList,
        Dialect.OPENAI,
        name=f"embeddings{_path.replace('/', '_')}",
    )(embeddings)
