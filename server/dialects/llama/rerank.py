"""llama-server's reranking: POST /v1/rerank (and /rerank, /reranking, /v1/reranking), with
--rerank.

Each document is scored against the query by a model with a rank head (a cross-encoder such
as jina-reranker or bge-reranker, or Qwen3-Reranker): the embeddings model when there is one
(--embeddingsmodel), else the model the body names, in the embedding machinery
(server/dialects/embedding/embeddings.py, server/core/llama/embedding/embedder.py) with llama.cpp's
rank pooling. The prompt per document is llama-server's (server/core/llama/embedding/rerank.py).

Two answer shapes, as llama-server: Jina's (`documents`: `{model, object, usage, results:
[{index, relevance_score}]}`) and, when the body sends `texts`, Hugging Face TEI's (a bare
list of `{index, score}`, with `text` when `return_text` asks). Best first, cut to `top_n`.
Without --rerank: llama-server's 501 `not_supported_error`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NotRequired

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from pydantic import Field
from typing_extensions import TypedDict

from server.core.types import FinishReason, GenerationOutcome, GenerationRequest
from server.dialects.chat.request_fields import new_id
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, busy_error
from server.dialects.embedding.embeddings import MAX_INPUTS, EmbeddingRoute, embeddings_of
from server.dialects.llama.infill import not_supported
from server.dialects.llama.schemas import LlamaBase
from server.dialects.pipeline.admission import on_model, submit
from server.dialects.pipeline.routing import Served, json_route
from server.dialects.streams.streaming import unless_disconnected

router = APIRouter(tags=["llama-server"])
OPENAI = Dialect.OPENAI
RERANK_OFF = "This server does not support reranking. Start it with `--reranking`"


class RerankRequest(LlamaBase):
    """POST /v1/rerank: Jina's body (`documents`) or TEI's (`texts`)."""

    model: str | None = None
    query: str
    documents: list[str] | None = None
    texts: list[str] | None = None  # TEI's name: the answer is TEI's bare list
    top_n: int | None = Field(default=None, ge=0, description="Only the best this many.")
    return_text: bool = False  # TEI: each result carries its document's text


class RerankResult(TypedDict):
    index: int
    relevance_score: float


class RerankUsage(TypedDict):
    prompt_tokens: int
    total_tokens: int


class RerankList(TypedDict):
    """Jina's answer shape (TEI's is a bare list of {index, score, text?})."""

    model: str
    object: Literal["list"]
    usage: RerankUsage
    results: list[RerankResult]


class TeiRank(TypedDict):
    index: int
    score: float
    text: NotRequired[str]


async def rerank(body: RerankRequest, served: Served) -> Response:
    """Score each document against the query, best first."""
    if not served.settings.rerank:
        raise not_supported(RERANK_OFF)
    tei = "texts" in body.model_fields_set  # llama-server: a body naming `texts` is TEI's
    documents = body.documents if body.documents is not None else body.texts
    if not documents:
        raise APIError(400, '"documents" must be a non-empty string array', dialect=OPENAI)
    if len(documents) > MAX_INPUTS:
        message = f"documents has {len(documents)} items; at most {MAX_INPUTS} per request"
        raise APIError(400, message, dialect=OPENAI)
    scores, tokens, model = await _scores(body, documents, served)
    ranked = sorted(range(len(documents)), key=lambda index: scores[index], reverse=True)
    ranked = ranked[: body.top_n if body.top_n is not None else len(ranked)]
    if tei:
        return JSONResponse([_tei(index, scores, documents, body.return_text) for index in ranked])
    answer: RerankList = {
        "model": body.model or model,
        "object": "list",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "results": [{"index": index, "relevance_score": scores[index]} for index in ranked],
    }
    return JSONResponse(answer)


def _tei(index: int, scores: list[float], documents: Sequence[str], with_text: bool) -> TeiRank:
    entry: TeiRank = {"index": index, "score": scores[index]}
    if with_text:
        entry["text"] = documents[index]
    return entry


async def _scores(
    body: RerankRequest, documents: Sequence[str], served: Served
) -> tuple[list[float], int, str]:
    """Each document's score, the prompt tokens they took, and the scoring model's name."""
    route = EmbeddingRoute(served.request, served.scheduler, served.settings, served.model, OPENAI)
    info, name = await route.model(body.model)
    generation = GenerationRequest(
        request_id=new_id("rerank-"),
        prompt="",
        max_tokens=1,
        embed_inputs=tuple(documents),
        rank_query=body.query,
    )
    if info is not None:
        generation = on_model(info, generation)
    job = submit(served.scheduler, info or served.model, generation, OPENAI)
    event, outcome = await unless_disconnected(served.request, embeddings_of(served.scheduler, job))
    _raise_if_failed(outcome)
    if event is None:  # pragma: no cover - the engine contract: scores before success
        raise APIError(500, "the model gave no scores", ErrorKind.SERVER, OPENAI)
    return [vector[0] for vector in event.vectors], sum(event.token_counts), name


def _raise_if_failed(outcome: GenerationOutcome) -> None:
    if outcome.server_stopping:
        raise busy_error()  # as a full queue: the client may retry
    if outcome.input_rejected:
        raise APIError(400, outcome.error or "document cannot be ranked", dialect=OPENAI)
    if outcome.finish_reason is FinishReason.CANCELLED:
        raise APIError(500, "the rerank request was aborted", ErrorKind.SERVER, OPENAI)
    if outcome.finish_reason is FinishReason.ERROR:
        raise APIError(500, outcome.error or "reranking failed", ErrorKind.SERVER, OPENAI)


for _path in ("/v1/rerank", "/rerank", "/reranking", "/v1/reranking"):  # llama-server's four
    json_route(
        router,
        _path,
        RerankRequest,
        OPENAI,
        answer=RerankList,
        name=f"rerank{_path.replace('/', '_')}",
    )(rerank)
