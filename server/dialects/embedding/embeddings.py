"""Embedding requests, whichever dialect asked: one request type, the queue, the vectors back.

Each dialect's route (`server/dialects/<dialect>/embeddings.py`) says what its body asks
(`EmbeddingAsk`) and how its answer looks, and registers it with `embedding_route`; here,
once: the dimensions check, which model embeds (the separate `--embeddingsmodel`, else the
model the body names, loaded as a generation would load it), taking a queue place (503 when
full), waiting while watching for the client to leave, and turning a failed job into the
dialect's error (400 for an input the model cannot take, 503 at shutdown, 500 otherwise).
With --pooling none there are no pooled vectors, only each token's: llama-server's /embeddings
answers them (`per_token_answer`); every other route refuses with llama-server's 400.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from server.core.scheduling.job import Job
from server.core.scheduling.scheduler import Scheduler
from server.core.types import (
    EmbeddingsEvent,
    EmbedInput,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
)
from server.dialects.chat.request_fields import new_id
from server.dialects.edge.deps import ModelInfo
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, busy_error
from server.dialects.pipeline.admission import named_model, on_model, submit
from server.dialects.pipeline.model_files import read_model_file
from server.dialects.pipeline.routing import Body, Served, json_route
from server.dialects.streams.streaming import unless_disconnected
from server.models.files import model_display_name
from server.settings.config import HearthSettings

# OpenAI's limit on the inputs of one request; each costs a decode slot, so it bounds the work.
MAX_INPUTS = 2048
# llama-server's answer on its OpenAI-compatible route when the server pools nothing.
NOT_POOLED = "Pooling type 'none' is not OAI compatible. Please use a different pooling type"


@dataclass(frozen=True, slots=True)
class Embedded:
    """A finished embedding request, for the dialect to write out."""

    vectors: tuple[tuple[float, ...], ...]
    prompt_tokens: int
    model: str  # the name of the model that embedded them
    seconds: float  # from arrival to the answer (Ollama's total_duration)
    # --pooling none: per input, its tokens' raw vectors (`vectors` is then empty).
    token_vectors: tuple[tuple[tuple[float, ...], ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class EmbeddingAsk:
    """What an embedding body asks, in every dialect's terms, and how its answer looks."""

    inputs: Sequence[EmbedInput]
    model: str | None
    truncate: bool  # cut an input longer than the model takes (else refuse it)
    id_prefix: str
    answer: Callable[[Embedded], Mapping[str, Any]]
    keep_alive: float | None = None
    dimensions: int | None = None  # the vectors' length the body asks for (checked, never cut)
    # Ollama's empty input: the request only loads its model (unloads it with keep_alive 0);
    # the answer, given the model's name.
    model_only_answer: Callable[[str], Mapping[str, Any]] | None = None
    # The answer when nothing is pooled (--pooling none), from each token's vector; None: the
    # route answers only pooled vectors, and refuses such a server's requests (NOT_POOLED).
    per_token_answer: Callable[[Embedded], Any] | None = None


def embedding_route(
    router: APIRouter,
    path: str,
    body_model: type[Body],
    answer: Any,
    dialect: Dialect,
    *,
    name: str | None = None,
) -> Callable[[Callable[[Body], EmbeddingAsk]], Callable[[Body], EmbeddingAsk]]:
    """Register an embedding endpoint at `path` answering what the decorated function reads
    in its body. `answer` documents the answer's shape."""

    def register(asked: Callable[[Body], EmbeddingAsk]) -> Callable[[Body], EmbeddingAsk]:
        async def handler(body: Body, served: Served) -> Response:
            ask = asked(body)
            route = EmbeddingRoute(
                served.request, served.scheduler, served.settings, served.model, dialect
            )
            await route.check_dimensions(ask.dimensions, ask.model)
            if ask.model_only_answer is not None:
                loaded = await route.load_only(ask.model, ask.keep_alive)
                return JSONResponse(ask.model_only_answer(loaded))
            if served.settings.pooling == "none" and ask.per_token_answer is None:
                raise APIError(400, NOT_POOLED, dialect=dialect)
            embedded = await route.embed(
                ask.inputs,
                model=ask.model,
                truncate=ask.truncate,
                id_prefix=ask.id_prefix,
                keep_alive=ask.keep_alive,
            )
            if embedded.token_vectors is not None and ask.per_token_answer is not None:
                return JSONResponse(ask.per_token_answer(embedded))
            return JSONResponse(ask.answer(embedded))

        json_route(router, path, body_model, dialect, answer=answer, name=name or asked.__name__)(
            handler
        )
        return asked

    return register


@dataclass(frozen=True, slots=True)
class EmbeddingRoute:
    """What every embedding endpoint takes from the app besides its body."""

    request: Request
    scheduler: Scheduler
    settings: HearthSettings
    served: ModelInfo
    dialect: Dialect

    async def model(self, name: str | None) -> tuple[ModelInfo | None, str]:
        """The chat model that embeds (None with --embeddingsmodel) and the name answers
        give: with --embeddingsmodel, that file whatever the body names (as KoboldCpp);
        otherwise the model the body names (the dialect's 404 if none matches)."""
        if self.settings.embeddingsmodel:
            return None, model_display_name(Path(self.settings.embeddingsmodel).expanduser())
        info = await named_model(self.request, self.scheduler, name, self.dialect)
        return info, info.name

    async def embedding_size(self, name: str | None) -> int | None:
        """The length of the vectors the embedding model gives, from its GGUF header (None
        for a scripted engine)."""
        if self.settings.embeddingsmodel:
            path: Path | None = Path(self.settings.embeddingsmodel).expanduser()
        else:
            info, _ = await self.model(name)
            path = info.path if info is not None else None
        file = await read_model_file(path, with_digest=False)
        return file[0].architecture_number("embedding_length") if file else None

    async def check_dimensions(self, dimensions: int | None, model: str | None) -> None:
        """A 400 for a `dimensions` other than the model's own size: vectors are never cut
        (only models trained for it, such as OpenAI's v3, stay meaningful when cut)."""
        if dimensions is None:
            return
        size = await self.embedding_size(model)
        if dimensions != size:
            fixed = f"of {size} dimensions" if size else "of a size fixed by the model"
            message = f"dimensions: this model's embeddings are {fixed}; they cannot be resized"
            raise APIError(400, message, dialect=self.dialect)

    async def embed(
        self,
        inputs: Sequence[EmbedInput],
        *,
        model: str | None,
        truncate: bool,
        id_prefix: str,
        keep_alive: float | None = None,
    ) -> Embedded:
        """Embed `inputs` in order."""
        started = time.perf_counter()
        check_inputs(inputs, self.dialect)
        info, name = await self.model(model)
        generation = GenerationRequest(
            request_id=new_id(id_prefix),
            prompt="",
            max_tokens=1,
            embed_inputs=tuple(inputs),
            embed_truncate=truncate,
            keep_alive=keep_alive,
        )
        job = self._submit(generation, info)
        event, outcome = await unless_disconnected(self.request, embeddings_of(self.scheduler, job))
        self._raise_if_failed(outcome)
        if event is None:  # pragma: no cover - the engine contract: vectors before success
            raise APIError(500, "the model gave no embeddings", ErrorKind.SERVER, self.dialect)
        seconds = time.perf_counter() - started
        return Embedded(event.vectors, outcome.prompt_tokens, name, seconds, event.token_vectors)

    async def load_only(self, model: str | None, keep_alive: float | None) -> str:
        """Ollama's empty input: load the model (unload with keep_alive 0) in queue order, as
        an empty prompt does; with --embeddingsmodel there is nothing to load. Its name."""
        info, name = await self.model(model)
        if info is None:
            return name
        generation = GenerationRequest(
            new_id("embed-"), "", max_tokens=1, keep_alive=keep_alive, model_only=True
        )
        job = self._submit(generation, info)
        _text, outcome = await self.scheduler.collect(job)
        self._raise_if_failed(outcome)
        return name

    def _submit(self, generation: GenerationRequest, info: ModelInfo | None) -> Job:
        if info is not None:
            generation = on_model(info, generation)
        return submit(self.scheduler, info or self.served, generation, self.dialect)

    def _raise_if_failed(self, outcome: GenerationOutcome) -> None:
        if outcome.server_stopping:
            raise busy_error()  # as a full queue: the client may retry
        if outcome.input_rejected:
            raise APIError(400, outcome.error or "input cannot be embedded", dialect=self.dialect)
        if outcome.finish_reason is FinishReason.CANCELLED:
            message = "the embedding request was aborted before it finished"
            raise APIError(500, message, ErrorKind.SERVER, self.dialect)
        if outcome.finish_reason is FinishReason.ERROR:
            message = outcome.error or "embedding failed"
            raise APIError(500, message, ErrorKind.SERVER, self.dialect)


def check_inputs(inputs: Sequence[EmbedInput], dialect: Dialect) -> None:
    """400 for what no model can embed: no inputs, too many, or an empty one (OpenAI's rules;
    a text of no characters has no meaning to give a vector)."""
    if not inputs:
        raise APIError(400, "input must not be empty", dialect=dialect)
    if len(inputs) > MAX_INPUTS:
        message = f"input has {len(inputs)} items; at most {MAX_INPUTS} per request"
        raise APIError(400, message, dialect=dialect)
    for index, item in enumerate(inputs):
        if len(item) == 0:
            raise APIError(400, f"input[{index}] is empty", dialect=dialect)


async def embeddings_of(
    scheduler: Scheduler, job: Job
) -> tuple[EmbeddingsEvent | None, GenerationOutcome]:
    """An embedding job's vectors (None if it gave none) and its outcome (rerank's scores
    too)."""
    event: EmbeddingsEvent | None = None
    async for item in scheduler.events(job):
        if isinstance(item, EmbeddingsEvent):
            event = item
        elif isinstance(item, GenerationOutcome):
            return event, item
    raise RuntimeError("job ended without an outcome")  # pragma: no cover - engine contract
