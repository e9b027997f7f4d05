"""KoboldCpp's POST /api/extra/embeddings: OpenAI's request and answer, with `truncate`.

KoboldCpp mirrors /v1/embeddings here (SillyTavern and KoboldAI Lite's TextDB send
`{"input": [...]}` and read `data[i].embedding`); `truncate` (default true, as KoboldCpp's)
cuts an input longer than the model takes instead of refusing it. Where KoboldCpp answers an
empty input with an empty list, Hearth answers 400, and errors are in KoboldCpp's
`{"detail": {...}}` shape.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from server.dialects.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.embeddings import EmbeddingRoute
from server.dialects.errors import Dialect, parse_json_body
from server.dialects.openai.embeddings import (
    EmbeddingList,
    OpenAIEmbeddingRequest,
    embedding_inputs,
    embedding_list,
)
from server.dialects.openapi import json_answer, json_body
from server.dialects.respond import CLIENT_GONE_STATUS

router = APIRouter(tags=["KoboldAI"])
KOBOLD = Dialect.KOBOLD


class KoboldEmbeddingRequest(OpenAIEmbeddingRequest):
    """POST /api/extra/embeddings."""

    truncate: bool = True


@router.post(
    "/api/extra/embeddings",
    dependencies=[key_required(KOBOLD)],
    openapi_extra=json_body(KoboldEmbeddingRequest),
    responses=json_answer(EmbeddingList),
    response_model=None,
)
async def embeddings(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    route = EmbeddingRoute(request, scheduler, settings, model, KOBOLD)
    body = await parse_json_body(request, KoboldEmbeddingRequest, KOBOLD)
    await route.check_dimensions(body.dimensions, body.model)
    embedded = await route.embed(
        embedding_inputs(body.input),
        model=body.model,
        truncate=body.truncate,
        id_prefix="kai-embd-",
    )
    if embedded is None:
        return Response(status_code=CLIENT_GONE_STATUS)
    return JSONResponse(embedding_list(embedded, body.encoding_format))
