"""Serving a planned generation: queued, then answered whole or streamed in its dialect's wire.

Once, for every dialect: waiting for a whole answer while watching for the client to leave
(`unless_disconnected`; the app answers a departed client's request with an empty 499),
reading engine events as chat events, keep-alives while silent, and one write per burst of
ready events. Several choices of one request are server/dialects/pipeline/choices.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from server.core.scheduling.job import Job, JobState
from server.core.scheduling.scheduler import Scheduler
from server.core.types import EngineReport, FinishReason, GenerationOutcome, Progress, TokenEvent
from server.dialects.chat.answers import ChatAnswer, TokenCollector, failed, failure_message
from server.dialects.chat.chat_reading import ChatEnd, ChatReader, read_answer
from server.dialects.chat.plans import ChatPlan
from server.dialects.edge.deps import ModelInfo
from server.dialects.edge.errors import (
    APIError,
    Dialect,
    ErrorKind,
    busy_error,
    context_overflow_error,
)
from server.dialects.pipeline.admission import on_model, submit
from server.dialects.streams.resumable import resumable_names, retained
from server.dialects.streams.streaming import KeepAliveClock, unless_disconnected
from server.dialects.streams.wire import Burst, Item, WireFormat


async def serve(
    request: Request,
    scheduler: Scheduler,
    model: ModelInfo,
    plan: ChatPlan,
    wire: WireFormat[Any],
    *,
    stream: bool,
    resumable: bool = False,
) -> Response:
    """Queue the plan's generation and answer it in `wire`'s dialect, streamed or whole."""
    names = resumable_names(request, plan, wire) if resumable else None
    job = submit(scheduler, model, on_model(model, plan.generation), wire.dialect)
    if not stream:
        collected = TokenCollector()
        outcome = await unless_disconnected(request, _collect(scheduler, job, collected))
        return JSONResponse(wire.whole(_answer(plan, outcome, collected, wire.dialect)))
    keepalive: float = request.app.state.keepalive_seconds
    bursts = _bursts(scheduler, job, plan, wire, keepalive)
    if names is not None:
        return retained(request, names, wire.dialect, bursts, partial(scheduler.cancel, job))
    return wire.response(bursts, job.abandoned)


def submit_all(
    scheduler: Scheduler, model: ModelInfo, plans: list[ChatPlan], dialect: Dialect
) -> list[Job]:
    """Queue one job per plan, or none: a refused request runs nothing for nobody."""
    jobs: list[Job] = []
    try:
        for plan in plans:
            jobs.append(submit(scheduler, model, on_model(model, plan.generation), dialect))
    except BaseException:
        for job in jobs:
            scheduler.cancel(job)
        raise
    return jobs


async def whole_answers(
    request: Request,
    scheduler: Scheduler,
    model: ModelInfo,
    plans: list[ChatPlan],
    dialect: Dialect,
) -> list[ChatAnswer]:
    """Several generations queued together (they batch with parallel slots), answered whole
    in order. All are read at once (a job whose events nobody read would be dropped as a
    stalled client), and none outlives the request."""
    jobs = submit_all(scheduler, model, plans, dialect)
    collectors = [TokenCollector() for _ in plans]
    try:
        reading = asyncio.gather(
            *(_collect(scheduler, job, into) for job, into in zip(jobs, collectors, strict=True))
        )
        outcomes = await unless_disconnected(request, reading)
    finally:
        for job in jobs:  # an abandoned request runs nothing for nobody
            if job.state is not JobState.DONE:
                scheduler.cancel(job)
    return [
        _answer(plan, outcome, collected, dialect)
        for plan, outcome, collected in zip(plans, outcomes, collectors, strict=True)
    ]


def _answer(
    plan: ChatPlan, outcome: GenerationOutcome, collected: TokenCollector, dialect: Dialect
) -> ChatAnswer:
    """A whole answer read back; a failed generation is a real 500 in the dialect's shape, or
    a 400 when the engine refused the request's input (media llama.cpp cannot read)."""
    if outcome.server_stopping:
        raise busy_error()  # as a full queue: the client may retry (on another server)
    if failed(outcome) and outcome.context_overflow is not None:
        raise context_overflow_error(outcome.context_overflow, failure_message(outcome), dialect)
    if failed(outcome) and outcome.input_rejected:
        raise APIError(400, failure_message(outcome), ErrorKind.BAD_INPUT, dialect)
    if failed(outcome):
        raise APIError(500, failure_message(outcome), ErrorKind.SERVER, dialect)
    return read_answer(plan, collected, outcome)


async def load_or_unload(
    scheduler: Scheduler,
    model: ModelInfo,
    plan: ChatPlan,
    dialect: Dialect,
    answer: Callable[[str], Mapping[str, object]],
) -> Response:
    """Queue a model-only request (in arrival order, like any other) and answer once done."""
    wanted = dataclasses.replace(plan.generation, model=model.name, model_only=True)
    job = submit(scheduler, model, wanted, dialect)
    _text, outcome = await scheduler.collect(job)
    if outcome.server_stopping:
        raise APIError(503, outcome.error or "", ErrorKind.SERVER, dialect)
    if outcome.finish_reason is not FinishReason.STOP:
        raise APIError(500, outcome.error or "the model was not loaded", dialect=dialect)
    return JSONResponse(answer("unload" if wanted.keep_alive == 0 else "load"))


async def _bursts(
    scheduler: Scheduler, job: Job, plan: ChatPlan, wire: WireFormat[Item], keepalive: float
) -> AsyncIterator[Burst[Item] | None]:
    """The stream in bursts: what arrived between two looks goes out in one write, and a
    keep-alive whenever the wire has been silent for `keepalive` seconds."""
    clock = KeepAliveClock(keepalive)
    opening = wire.opening()
    if opening:
        yield opening
    reader = ChatReader(plan)
    async for batch in scheduler.event_batches(job, idle_timeout=clock.look_every):
        burst = [] if batch is None else read_batch(reader, wire, batch)[0]
        if burst:
            clock.wrote()
            yield burst
        elif clock.keepalive_due():
            yield wire.keepalive()


def read_batch(
    reader: ChatReader, wire: WireFormat[Item], batch: list[EngineReport]
) -> tuple[Burst[Item], ChatAnswer | None]:
    """A batch of one job's events as what its wire sends, and the answer once it ends."""
    burst: Burst[Item] = []
    answer = None
    for event in batch:
        if isinstance(event, Progress):  # only there when the request asked for them
            burst += wire.progress(event)
            continue
        for item in reader.read(event):
            if isinstance(item, ChatEnd):
                answer = item.answer
                burst += wire.ending(answer)
            else:
                burst += wire.event(item)
    return burst, answer


async def _collect(scheduler: Scheduler, job: Job, into: TokenCollector) -> GenerationOutcome:
    async for event in scheduler.events(job):
        if isinstance(event, TokenEvent):
            into.add(event)
        elif isinstance(event, GenerationOutcome):
            return event
    raise RuntimeError("job ended without an outcome")  # pragma: no cover - engine contract
