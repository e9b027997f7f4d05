"""Ollama's embedding endpoints: POST /api/embed and the legacy POST /api/embeddings.

https://github.com/ollama/ollama/blob/main/docs/api.md#generate-embeddings. As in Ollama, an
empty input only loads the model (unloads it with keep_alive 0) and answers no vectors, and
`truncate` (default true) cuts an input longer than the model takes instead of refusing it.
The legacy endpoint embeds one `prompt`; unlike Ollama's, its vector is normalised too, so
both endpoints give the same vector for the same text.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import Field
from typing_extensions import TypedDict

from server.core.types import EmbedInput
from server.dialects.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.embeddings import EmbeddingRoute
from server.dialects.errors import Dialect, parse_json_body
from server.dialects.limits import C_INT_MAX
from server.dialects.ollama.schemas import KeepsAlive, OllamaOptions
from server.dialects.openapi import json_answer, json_body
from server.dialects.respond import CLIENT_GONE_STATUS

router = APIRouter(tags=["Ollama"])
OLLAMA = Dialect.OLLAMA
RequireKey = key_required(OLLAMA)
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


@router.post(
    "/api/embed",
    dependencies=[RequireKey],
    openapi_extra=json_body(OllamaEmbedRequest),
    responses=json_answer(EmbedResponse),
    response_model=None,
)
async def embed(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    route = EmbeddingRoute(request, scheduler, settings, model, OLLAMA)
    body = await parse_json_body(request, OllamaEmbedRequest, OLLAMA)
    await route.check_dimensions(body.dimensions, body.model)
    inputs: list[EmbedInput] = [body.input] if isinstance(body.input, str) else [*body.input]
    if not inputs or inputs == [""]:
        name = await route.load_only(body.model, body.keep_alive)
        answer: EmbedResponse = {
            "model": name,
            "embeddings": [],
            "total_duration": 0,
            "load_duration": 0,
            "prompt_eval_count": 0,
        }
        return JSONResponse(answer)
    embedded = await route.embed(
        inputs,
        model=body.model,
        truncate=body.truncate,
        id_prefix="embed-",
        keep_alive=body.keep_alive,
    )
    if embedded is None:
        return Response(status_code=CLIENT_GONE_STATUS)
    answer = {
        "model": embedded.model,
        "embeddings": [list(vector) for vector in embedded.vectors],
        "total_duration": int(embedded.seconds * _NANOSECONDS),
        "load_duration": 0,  # a model switch, if any, is counted in total_duration
        "prompt_eval_count": embedded.prompt_tokens,
    }
    return JSONResponse(answer)


@router.post(
    "/api/embeddings",
    dependencies=[RequireKey],
    openapi_extra=json_body(OllamaEmbeddingsRequest),
    responses=json_answer(EmbeddingResponse),
    response_model=None,
)
async def embeddings(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    route = EmbeddingRoute(request, scheduler, settings, model, OLLAMA)
    body = await parse_json_body(request, OllamaEmbeddingsRequest, OLLAMA)
    if not body.prompt:
        await route.load_only(body.model, body.keep_alive)
        return JSONResponse({"embedding": []})
    embedded = await route.embed(
        [body.prompt],
        model=body.model,
        truncate=True,
        id_prefix="embed-",
        keep_alive=body.keep_alive,
    )
    if embedded is None:
        return Response(status_code=CLIENT_GONE_STATUS)
    answer: EmbeddingResponse = {"embedding": list(embedded.vectors[0])}
    return JSONResponse(answer)
