"""OpenAI's embeddings endpoint: POST /v1/embeddings, and /embeddings as llama-server serves it.

https://platform.openai.com/docs/api-reference/embeddings/create. Its shapes live here rather
than in schemas.py because KoboldCpp's /api/extra/embeddings answers in the same shape and
imports them. `encoding_format: "base64"` (the official client's default) sends each vector as
its little-endian float32 bytes; `dimensions` other than the model's own size is a 400
(EmbeddingRoute.check_dimensions).
"""

from __future__ import annotations

import base64
import struct
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import Field
from typing_extensions import TypedDict

from server.core.types import EmbedInput
from server.dialects.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.embeddings import Embedded, EmbeddingRoute
from server.dialects.errors import Dialect, parse_json_body
from server.dialects.limits import C_INT_MAX
from server.dialects.openai.schemas import OpenAIBase
from server.dialects.openapi import json_answer, json_body
from server.dialects.respond import CLIENT_GONE_STATUS

router = APIRouter(tags=["OpenAI"])
OPENAI = Dialect.OPENAI

TokenId = int
OpenAIEmbeddingInput = str | list[str] | list[TokenId] | list[list[TokenId]]


class OpenAIEmbeddingRequest(OpenAIBase):
    """POST /v1/embeddings."""

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


async def embeddings(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    route = EmbeddingRoute(request, scheduler, settings, model, OPENAI)
    body = await parse_json_body(request, OpenAIEmbeddingRequest, OPENAI)
    await route.check_dimensions(body.dimensions, body.model)
    embedded = await route.embed(
        embedding_inputs(body.input), model=body.model, truncate=False, id_prefix="embd-"
    )
    if embedded is None:
        return Response(status_code=CLIENT_GONE_STATUS)
    return JSONResponse(embedding_list(embedded, body.encoding_format))


for _path in ("/v1/embeddings", "/embeddings"):  # the second is llama-server's
    router.add_api_route(
        _path,
        embeddings,
        methods=["POST"],
        name=f"embeddings{_path.replace('/', '_')}",
        dependencies=[key_required(OPENAI)],
        openapi_extra=json_body(OpenAIEmbeddingRequest),
        responses=json_answer(EmbeddingList),
        response_model=None,
    )
