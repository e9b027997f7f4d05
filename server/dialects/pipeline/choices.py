"""Several choices of one request (OpenAI's `n`): each its own generation and job, so they
batch with parallel slots; answered whole together, or streamed with their chunks interleaved
as they come.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from server.core.scheduling.job import Job
from server.core.scheduling.scheduler import Scheduler
from server.core.types import EngineReport
from server.dialects.chat.answers import ChatAnswer
from server.dialects.chat.chat_reading import ChatReader
from server.dialects.chat.plans import ChatPlan
from server.dialects.edge.deps import ModelInfo
from server.dialects.pipeline.serving import read_batch, submit_all, whole_answers
from server.dialects.streams.resumable import resumable_names, retained
from server.dialects.streams.streaming import KeepAliveClock
from server.dialects.streams.wire import Burst, ChoicesFormat, Item


def choice_plans(plan: ChatPlan, count: int, server_seed: int) -> list[ChatPlan]:
    """`count` copies of a plan that differ in their seed: the request's (or the server's
    --seed, or a random one) for the first, the next ones after it, so that the choices differ
    and a seeded request still gives the same choices each time."""
    sampling = plan.generation.sampling
    seed = sampling.seed if sampling.seed >= 0 else server_seed
    if seed < 0:
        seed = random.randrange(1 << 31)
    return [
        dataclasses.replace(
            plan,
            generation=dataclasses.replace(
                plan.generation,
                request_id=f"{plan.generation.request_id}-{index}"
                if index
                else plan.generation.request_id,
                sampling=dataclasses.replace(sampling, seed=(seed + index) % (1 << 31)),
            ),
        )
        for index in range(count)
    ]


async def serve_choices(
    request: Request,
    scheduler: Scheduler,
    model: ModelInfo,
    plans: list[ChatPlan],
    wire: ChoicesFormat[Any],
    *,
    stream: bool,
    resumable: bool = False,
) -> Response:
    """Queue every choice's generation and answer them in `wire`'s dialect."""
    names = resumable_names(request, plans[0], wire) if resumable else None
    if not stream:
        answers = await whole_answers(request, scheduler, model, plans, wire.dialect)
        return JSONResponse(wire.whole_choices(answers))
    jobs = submit_all(scheduler, model, plans, wire.dialect)
    dropped = asyncio.Event()  # any choice's client stopped reading: the whole stream goes
    watchers = [asyncio.ensure_future(job.abandoned.wait()) for job in jobs]
    for watcher in watchers:
        watcher.add_done_callback(lambda done: None if done.cancelled() else dropped.set())
    keepalive: float = request.app.state.keepalive_seconds
    bursts = _choice_bursts(scheduler, jobs, plans, wire, keepalive, watchers)
    if names is not None:

        def stop_every_choice() -> None:
            for job in jobs:
                scheduler.cancel(job)

        return retained(request, names, wire.dialect, bursts, stop_every_choice)
    return wire.response(bursts, dropped)


async def _choice_bursts(
    scheduler: Scheduler,
    jobs: list[Job],
    plans: list[ChatPlan],
    wire: ChoicesFormat[Item],
    keepalive: float,
    watchers: Sequence[asyncio.Future[Any]],
) -> AsyncIterator[Burst[Item] | None]:
    """The bursts of several choices' streams, in the order their events arrive."""
    # Bounded: a client that stops reading stalls the pumps, so each job's own unread-event
    # limit still drops it.
    arrived: asyncio.Queue[tuple[int, list[EngineReport]]] = asyncio.Queue(maxsize=len(jobs))

    async def pump(index: int, job: Job) -> None:
        async for batch in scheduler.event_batches(job):
            if batch is not None:
                await arrived.put((index, batch))

    pumps = [asyncio.ensure_future(pump(index, job)) for index, job in enumerate(jobs)]
    wires = [wire.choice(index) for index in range(len(jobs))]
    readers = [ChatReader(plan) for plan in plans]
    answers: list[ChatAnswer | None] = [None] * len(jobs)
    clock = KeepAliveClock(keepalive)
    try:
        yield [item for choice in wires for item in choice.opening()]
        while True:
            try:
                index, batch = await asyncio.wait_for(arrived.get(), clock.look_every)
            except TimeoutError:
                if clock.keepalive_due():
                    yield wire.keepalive()
                continue
            burst, answer = read_batch(readers[index], wires[index], batch)
            answers[index] = answer or answers[index]
            finished = [answer for answer in answers if answer is not None]
            if len(finished) == len(answers):
                yield burst + wire.closing(finished)
                return
            if burst:
                clock.wrote()
                yield burst
            elif clock.keepalive_due():
                yield wire.keepalive()
    finally:
        for task in [*pumps, *watchers]:  # a pump cancelled mid-stream cancels its job
            task.cancel()
