"""One way to answer a generation request, whichever dialect asked.

A dialect registers each generation endpoint with `generation_route`, giving a planner: body
→ `Generation` (the `ChatPlan` from its adapter and the `WireFormat` from its formatter).
Everything else is here, once: the password check, parsing the body, taking a queue place (503
with KoboldCpp's body when full), waiting for a whole answer while watching for the client to
leave, reading engine events as chat events, keep-alives while silent, and one write per burst
of ready events. A dialect only says how an answer, or each event of a stream, looks on its
wire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Generic, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from sse_starlette import ServerSentEvent

from server.core.job import Job, JobState
from server.core.scheduler import QueueFullError, Scheduler
from server.core.tool_stream import ChatStreamEvent
from server.core.types import (
    EngineEvent,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    TokenEvent,
)
from server.dialects.client_address import client_address
from server.dialects.common import (
    ChatAnswer,
    ChatEnd,
    ChatOptions,
    ChatPlan,
    ChatReader,
    TokenCollector,
    failed,
    failure_message,
    new_id,
    read_answer,
)
from server.dialects.deps import ModelInfo, ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.errors import APIError, Dialect, ErrorKind, busy_error, parse_json_body
from server.dialects.model_choice import ModelChoice
from server.dialects.openapi import json_answer, json_body
from server.dialects.resumable import ResumableStreams, stream_response, url_safe, wants_resumable
from server.dialects.streaming import (
    ClientDisconnectedError,
    ndjson_response,
    sse_response,
    unless_disconnected,
)
from server.settings.config import HearthSettings

CLIENT_GONE_STATUS = 499  # nginx's "client closed request": nobody reads this response

Item = TypeVar("Item")  # one unit of a dialect's stream: an SSE event, an NDJSON object
Burst = list[Item]


class WireFormat(ABC, Generic[Item]):
    """How one dialect writes the answer to one request, whole or streamed.

    An instance serves one request, so it may keep the stream's state (open blocks, indexes).
    """

    dialect: ClassVar[Dialect]

    @abstractmethod
    def whole(self, answer: ChatAnswer) -> Mapping[str, Any]:
        """The non-streamed answer's JSON body."""

    def opening(self) -> Burst[Item]:
        """What a stream sends before any event (a role chunk, a start event)."""
        return []

    @abstractmethod
    def event(self, item: ChatStreamEvent) -> Burst[Item]:
        """A piece of text or of a tool call."""

    @abstractmethod
    def ending(self, answer: ChatAnswer) -> Burst[Item]:
        """The end of a stream: finish reason and usage, or a failure in-band."""

    @abstractmethod
    def keepalive(self) -> Burst[Item] | None:
        """Sent while the generation is silent; None for the framing's own (SSE comment)."""

    @abstractmethod
    def response(
        self, bursts: AsyncIterator[Burst[Item] | None], drop_when: asyncio.Event
    ) -> Response:
        """The streaming response that frames these items."""


class SSEFormat(WireFormat[ServerSentEvent]):
    def keepalive(self) -> None:
        return None

    def response(
        self, bursts: AsyncIterator[Burst[ServerSentEvent] | None], drop_when: asyncio.Event
    ) -> Response:
        return sse_response(bursts, drop_when)


class ChoicesFormat(WireFormat[Item]):
    """A wire that also answers several choices of one request (OpenAI's `n`): each choice
    is its own generation, written by its own copy of the wire."""

    @abstractmethod
    def choice(self, index: int) -> ChoicesFormat[Item]:
        """The wire writing choice `index`: its opening, events and ending (which ends that
        choice only: `closing` ends the stream once every choice has)."""

    @abstractmethod
    def whole_choices(self, answers: Sequence[ChatAnswer]) -> Mapping[str, Any]:
        """The non-streamed answer holding every choice."""

    @abstractmethod
    def closing(self, answers: Sequence[ChatAnswer]) -> Burst[Item]:
        """The end of a stream of several choices, after each one's ending."""


Line = TypeVar("Line", bound=Mapping[str, object])  # one NDJSON object


class NDJSONFormat(WireFormat[Line]):
    def response(
        self, bursts: AsyncIterator[Burst[Line] | None], drop_when: asyncio.Event
    ) -> Response:
        return ndjson_response(bursts, drop_when)


@dataclass(frozen=True, slots=True)
class Served:
    """What planning a generation may use besides its body."""

    request: Request
    settings: HearthSettings
    model: ModelInfo

    def chat_options(self, id_prefix: str) -> ChatOptions:
        return ChatOptions(
            self.model.chat_template,
            new_id(id_prefix),
            self.settings.defaultgenamt,
            self.settings.jinja_tools,
        )


@dataclass(frozen=True, slots=True)
class Generation:
    """A planned generation, the wire it is answered in, and whether it streams."""

    plan: ChatPlan
    wire: WireFormat[Any]
    stream: bool
    # A request that only loads or unloads its model (plan.generation.model_only): the whole
    # answer, given "load" or "unload" (Ollama's empty prompt).
    model_only_answer: Callable[[str], Mapping[str, object]] | None = None
    # OpenAI's `n`: this many replies, each its own generation (`wire` is a ChoicesFormat).
    choices: int = 1
    # The body asked for a stream that survives a dropped connection (server/dialects/resumable.py);
    # the `X-Hearth-Resumable` header asks the same of any SSE route.
    resumable: bool = False


Body = TypeVar("Body", bound=BaseModel)
Planner = Callable[[Body, Served], Generation]


def generation_route(
    router: APIRouter, path: str, body_model: type[Body], answer: Any, dialect: Dialect
) -> Callable[[Planner[Body]], Planner[Body]]:
    """Register a generation endpoint at `path`: its password check, its body parsed in the
    dialect's error shape, then the decorated planner's generation served. `answer` documents
    the whole (non-streamed) answer's shape, or is None."""

    def register(planner: Planner[Body]) -> Planner[Body]:
        async def endpoint(
            request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
        ) -> Response:
            body = await parse_json_body(request, body_model, dialect)
            name = getattr(body, "model", None)
            model = await named_model(request, scheduler, model, name, dialect)
            generation = planner(body, Served(request, settings, model))
            resumable = generation.stream and (generation.resumable or wants_resumable(request))
            if generation.model_only_answer is not None:
                return await load_or_unload(
                    scheduler, model, generation, generation.model_only_answer
                )
            if generation.choices > 1:
                assert isinstance(generation.wire, ChoicesFormat)
                plans = choice_plans(generation.plan, generation.choices, settings.seed)
                return await serve_choices(
                    request,
                    scheduler,
                    model,
                    plans,
                    generation.wire,
                    stream=generation.stream,
                    resumable=resumable,
                )
            return await serve(
                request,
                scheduler,
                model,
                generation.plan,
                generation.wire,
                stream=generation.stream,
                resumable=resumable,
            )

        router.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            name=planner.__name__,
            dependencies=[key_required(dialect)],
            openapi_extra=json_body(body_model),
            responses=None if answer is None else json_answer(answer),
        )
        return planner

    return register


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
    names = _resumable_names(request, plan, wire) if resumable else None
    job = submit(scheduler, model, _on_model(request, model, plan.generation), wire.dialect)
    if stream:
        keepalive: float = request.app.state.keepalive_seconds
        bursts = _bursts(scheduler, job, plan, wire, keepalive)
        if names is not None:
            return _retained(request, names, wire.dialect, bursts, partial(scheduler.cancel, job))
        return wire.response(bursts, job.abandoned)
    answer = await _finished_answer(request, scheduler, job, plan, wire.dialect)
    if answer is None:
        return Response(status_code=CLIENT_GONE_STATUS)
    return JSONResponse(wire.whole(answer))


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
    """Several choices of one request (OpenAI's `n`), each its own job, so they batch with
    parallel slots; answered whole or streamed, their chunks interleaved as they come."""
    names = _resumable_names(request, plans[0], wire) if resumable else None
    if not stream:
        answers = await whole_answers(request, scheduler, model, plans, wire.dialect)
        if answers is None:
            return Response(status_code=CLIENT_GONE_STATUS)
        return JSONResponse(wire.whole_choices(answers))
    jobs: list[Job] = []
    try:
        for plan in plans:
            jobs.append(
                submit(scheduler, model, _on_model(request, model, plan.generation), wire.dialect)
            )
    except BaseException:
        for job in jobs:  # the request is refused whole: no choice runs for nobody
            scheduler.cancel(job)
        raise
    dropped = asyncio.Event()  # any choice's client stopped reading: the whole stream goes
    watchers = [asyncio.ensure_future(job.abandoned.wait()) for job in jobs]
    for watcher in watchers:
        watcher.add_done_callback(partial(_set_unless_cancelled, dropped))
    keepalive: float = request.app.state.keepalive_seconds
    bursts = _choice_bursts(scheduler, jobs, plans, wire, keepalive, watchers)
    if names is not None:

        def stop_every_choice() -> None:
            for job in jobs:
                scheduler.cancel(job)

        return _retained(request, names, wire.dialect, bursts, stop_every_choice)
    return wire.response(bursts, dropped)


def _resumable_names(request: Request, plan: ChatPlan, wire: WireFormat[Any]) -> list[str] | None:
    """What a resumable stream will be fetched by (None: this wire cannot be resumed, as only
    SSE streams are), refused with a 400 before any work if a running stream has a name."""
    if not isinstance(wire, SSEFormat):
        return None
    names = _stream_names(plan, wire)
    request.app.state.resumable_streams.check_names(names, wire.dialect)
    return names


def _stream_names(plan: ChatPlan, wire: WireFormat[Any]) -> list[str]:
    """What a resumable stream is fetched by: the id its events carry (OpenAI's and
    Anthropic's response id), and the client's genkey (KoboldAI's name for a generation)."""
    generation = plan.generation
    genkey = [generation.genkey] if generation.genkey else []
    if wire.dialect is Dialect.KOBOLD and genkey and url_safe(generation.genkey):
        return genkey
    # The first name goes in the header and the resume URL, so it must be URL-safe; KoboldAI's
    # own request ids are counted, so guessable: a random name stands in for them.
    first = new_id("kai-stream-") if wire.dialect is Dialect.KOBOLD else generation.request_id
    return [first, *genkey]


def _retained(
    request: Request,
    names: Sequence[str],
    dialect: Dialect,
    bursts: AsyncIterator[Burst[ServerSentEvent] | None],
    stop_generation: Callable[[], None],
) -> Response:
    """A resumable stream: retained from its first event, this connection its first reader."""
    streams: ResumableStreams = request.app.state.resumable_streams
    stream = streams.open(names, dialect, bursts, stop_generation)
    return stream_response(streams, stream, -1, request.app.state.keepalive_seconds)


def _set_unless_cancelled(event: asyncio.Event, watcher: asyncio.Future[Any]) -> None:
    if not watcher.cancelled():
        event.set()


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
    arrived: asyncio.Queue[tuple[int, list[EngineEvent]]] = asyncio.Queue(maxsize=len(jobs))

    async def pump(index: int, job: Job) -> None:
        async for batch in scheduler.event_batches(job):
            if batch is not None:
                await arrived.put((index, batch))

    pumps = [asyncio.ensure_future(pump(index, job)) for index, job in enumerate(jobs)]
    wires = [wire.choice(index) for index in range(len(jobs))]
    readers = [ChatReader(plan) for plan in plans]
    answers: list[ChatAnswer | None] = [None] * len(jobs)
    try:
        yield [item for choice in wires for item in choice.opening()]
        while True:
            try:
                index, batch = await asyncio.wait_for(arrived.get(), keepalive)
            except TimeoutError:
                yield wire.keepalive()
                continue
            burst: Burst[Item] = []
            for event in batch:
                for item in readers[index].read(event):
                    if isinstance(item, ChatEnd):
                        answers[index] = item.answer
                        burst += wires[index].ending(item.answer)
                    else:
                        burst += wires[index].event(item)
            finished = [answer for answer in answers if answer is not None]
            if len(finished) == len(answers):
                yield burst + wire.closing(finished)
                return
            if burst:
                yield burst
    finally:
        for task in [*pumps, *watchers]:  # a pump cancelled mid-stream cancels its job
            task.cancel()


async def whole_answers(
    request: Request,
    scheduler: Scheduler,
    model: ModelInfo,
    plans: list[ChatPlan],
    dialect: Dialect,
) -> list[ChatAnswer] | None:
    """Several generations queued together (they batch with parallel slots), answered whole
    in order; None if the client left. All are read at once (a job whose events nobody read
    would be dropped as a stalled client), and none outlives the request."""
    jobs: list[Job] = []
    collectors = [TokenCollector() for _ in plans]
    try:
        for plan in plans:
            jobs.append(
                submit(scheduler, model, _on_model(request, model, plan.generation), dialect)
            )
        reading = asyncio.gather(
            *(_collect(scheduler, job, into) for job, into in zip(jobs, collectors, strict=True))
        )
        outcomes = await unless_disconnected(request, reading)
    except ClientDisconnectedError:
        return None
    finally:
        for job in jobs:  # a refused or abandoned request runs nothing for nobody
            if job.state is not JobState.DONE:
                scheduler.cancel(job)
    answers = []
    for plan, outcome, collected in zip(plans, outcomes, collectors, strict=True):
        if outcome.server_stopping:
            raise busy_error()
        if failed(outcome):
            raise APIError(500, failure_message(outcome), ErrorKind.SERVER, dialect)
        answers.append(read_answer(plan, collected.text, outcome, collected.trace))
    return answers


def _on_model(
    request: Request, model: ModelInfo, generation: GenerationRequest
) -> GenerationRequest:
    if request.app.state.model_choice is None:
        return generation
    return dataclasses.replace(generation, model=model.name)  # the scheduler runs it there


async def named_model(
    request: Request, scheduler: Scheduler, served: ModelInfo, name: str | None, dialect: Dialect
) -> ModelInfo:
    """The model a body names (the dialect's 404 if none matches), else the one serving now;
    `served` when the server has no model choice (a scripted engine)."""
    choice: ModelChoice | None = request.app.state.model_choice
    if choice is None:
        return served
    return await choice.info_for(name, dialect, scheduler.snapshot().serving)


async def load_or_unload(
    scheduler: Scheduler,
    model: ModelInfo,
    generation: Generation,
    answer: Callable[[str], Mapping[str, object]],
) -> Response:
    """Queue a model-only request (in arrival order, like any other) and answer once done."""
    wanted = dataclasses.replace(generation.plan.generation, model=model.name, model_only=True)
    dialect = generation.wire.dialect
    job = submit(scheduler, model, wanted, dialect)
    _text, outcome = await scheduler.collect(job)
    if outcome.server_stopping:
        raise APIError(503, outcome.error or "", ErrorKind.SERVER, dialect)
    if outcome.finish_reason is not FinishReason.STOP:
        raise APIError(500, outcome.error or "the model was not loaded", dialect=dialect)
    return JSONResponse(answer("unload" if wanted.keep_alive == 0 else "load"))


def submit(
    scheduler: Scheduler, model: ModelInfo, generation: GenerationRequest, dialect: Dialect
) -> Job:
    """Take a queue place or answer 503 with KoboldCpp's body (the same for every dialect).

    A JSON schema (response format, tool parameters) that cannot become a grammar is refused
    here with a 400, before any byte of a stream: found later it could only be a failure."""
    if generation.json_schema is not None:
        try:
            model.schemas.check_json_schema(generation.json_schema)
        except ValueError as exc:
            raise APIError(400, f"Unusable JSON schema: {exc}", dialect=dialect) from None
    elif generation.grammar is not None:
        try:
            model.schemas.check_grammar(generation.grammar)
        except ValueError as exc:
            raise APIError(400, f"Invalid grammar: {exc}", dialect=dialect) from None
    # Who asked and how, for the launcher's live view of requests (server/dialects/admin_live.py).
    generation = dataclasses.replace(generation, client=client_address(), dialect=dialect.value)
    try:
        job = scheduler.submit(generation)
    except QueueFullError:
        raise busy_error() from None
    scheduler.count_admitted(dialect.value)
    return job


async def _bursts(
    scheduler: Scheduler, job: Job, plan: ChatPlan, wire: WireFormat[Item], keepalive: float
) -> AsyncIterator[Burst[Item] | None]:
    """The stream in bursts: what arrived between two looks goes out in one write."""
    opening = wire.opening()
    if opening:
        yield opening
    reader = ChatReader(plan)
    async for batch in scheduler.event_batches(job, idle_timeout=keepalive):
        if batch is None:
            yield wire.keepalive()
            continue
        burst: Burst[Item] = []
        for event in batch:
            for item in reader.read(event):
                burst += wire.ending(item.answer) if isinstance(item, ChatEnd) else wire.event(item)
        if burst:
            yield burst


async def _finished_answer(
    request: Request, scheduler: Scheduler, job: Job, plan: ChatPlan, dialect: Dialect
) -> ChatAnswer | None:
    """A non-streamed request's answer, or None if the client left (the job was cancelled).
    A failed generation is a real 500 in the dialect's shape."""
    collected = TokenCollector()
    try:
        outcome = await unless_disconnected(request, _collect(scheduler, job, collected))
    except ClientDisconnectedError:
        return None
    if outcome.server_stopping:
        raise busy_error()  # as a full queue: the client may retry (on another server)
    if failed(outcome):
        raise APIError(500, failure_message(outcome), ErrorKind.SERVER, dialect)
    return read_answer(plan, collected.text, outcome, collected.trace)


async def _collect(scheduler: Scheduler, job: Job, into: TokenCollector) -> GenerationOutcome:
    async for event in scheduler.events(job):
        if isinstance(event, TokenEvent):
            into.add(event)
        elif isinstance(event, GenerationOutcome):
            return event
    raise RuntimeError("job ended without an outcome")  # pragma: no cover - engine contract
