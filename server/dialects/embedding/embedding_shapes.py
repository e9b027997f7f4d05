"""OpenAI's embedding request and answer, which two dialects speak.

https://platform.openai.com/docs/api-reference/embeddings/create: POST /v1/embeddings (and
llama-server's /embeddings), and KoboldCpp's /api/extra/embeddings, which mirrors it (SillyTavern
and KoboldAI Lite's TextDB send `{"input": [...]}` and read `data[i].embedding`).
`encoding_format: "base64"` (the official client's default) sends each vector as its
little-endian float32 bytes.
"""

from __future__ import annotations

import base64
import struct
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from server.core.types import EmbedInput
from server.dialects.edge.limits import C_INT_MAX
from server.dialects.embedding.embeddings import Embedded

TokenId = int
OpenAIEmbeddingInput = str | list[str] | list[TokenId] | list[list[TokenId]]


class OpenAIEmbeddingRequest(BaseModel):
    """POST /v1/embeddings."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)  # as every OpenAI body

    input: OpenAIEmbeddingInput
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1, le=C_INT_MAX)
    user: str | None = None


class EmbeddingItem(TypedDict):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str  # a string: base64 of little-endian float32


class EmbeddingUsage(TypedDict):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(TypedDict):
    """The answer of /v1/embeddings (and of KoboldCpp's /api/extra/embeddings)."""

    object: Literal["list"]
    data: list[EmbeddingItem]
    model: str
    usage: EmbeddingUsage


def embedding_inputs(value: OpenAIEmbeddingInput) -> list[EmbedInput]:
    """`input` as inputs: a text, texts, one input's token ids, or several inputs' ids."""
    texts: list[EmbedInput] = []
    one_input_ids: list[int] = []
    for item in [value] if isinstance(value, str) else value:
        if isinstance(item, int):
            one_input_ids.append(item)
        elif isinstance(item, str):
            texts.append(item)
        else:
            texts.append(tuple(item))
    return [tuple(one_input_ids)] if one_input_ids else texts


def embedding_list(embedded: Embedded, encoding: Literal["float", "base64"]) -> EmbeddingList:
    data: list[EmbeddingItem] = [
        {"object": "embedding", "index": index, "embedding": _encoded(vector, encoding)}
        for index, vector in enumerate(embedded.vectors)
    ]
    tokens = embedded.prompt_tokens
    return {
        "object": "list",
        "data": data,
        "model": embedded.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _encoded(vector: tuple[float, ...], encoding: Literal["float", "base64"]) -> list[float] | str:
    if encoding == "float":
        return list(vector)
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
