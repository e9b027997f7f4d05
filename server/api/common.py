"""What every dialect shares: admission, waiting with disconnect handling, chat requests with
tools, and reading a finished generation back as text or a tool call.

Each dialect's adapter only maps its wire fields onto these calls, so queue rules, genkeys,
abort and disconnects behave identically whichever API a client speaks.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from server.api.deps import ModelInfo
from server.api.errors import APIError, Dialect, ErrorKind, busy_error
from server.core.chat import (
    TOOL_DECISION_QUESTION,
    ChatMessage,
    ChatTemplate,
    ChatTemplateError,
    ToolCall,
    ToolSpec,
    parse_tool_call,
    tool_call_schema,
)
from server.core.scheduler import Job, QueueFullError, Scheduler
from server.core.tool_stream import (
    ChatStreamEvent,
    TextDelta,
    ToolCallParser,
    new_call_id,
    whole_call_events,
)
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
)
from server.streaming import ClientDisconnectedError, unless_disconnected

# KoboldCpp caps tool-call sampling this way: a call must be well formed more than creative.
_TOOL_CALL_MAX_TEMPERATURE = 0.5


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


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
    try:
        return scheduler.submit(generation)
    except QueueFullError:
        raise busy_error() from None


CLIENT_GONE_STATUS = 499  # nginx's "client closed request": nobody reads this response


async def finished_text(
    request: Request, scheduler: Scheduler, job: Job, dialect: Dialect
) -> tuple[str, GenerationOutcome] | None:
    """A non-streamed request's whole text and outcome, or None if the client left (the job
    was cancelled). A failed generation is a real 500 in the dialect's shape."""
    try:
        text, outcome = await run_to_end(request, scheduler, job)
    except ClientDisconnectedError:
        return None
    if outcome.server_stopping:
        raise busy_error()  # as a full queue: the client may retry (on another server)
    if failed(outcome):
        raise APIError(500, failure_message(outcome), ErrorKind.SERVER, dialect)
    return text, outcome


async def answer_when_done(
    request: Request,
    scheduler: Scheduler,
    job: Job,
    dialect: Dialect,
    body_of: Callable[[str, GenerationOutcome], dict[str, Any]],
) -> Response:
    """A non-streamed request's answer: `body_of(text, outcome)` as JSON once the generation
    is over, or nothing (499, nobody reads it) if the client left meanwhile."""
    finished = await finished_text(request, scheduler, job, dialect)
    if finished is None:
        return Response(status_code=CLIENT_GONE_STATUS)
    return JSONResponse(body_of(*finished))


async def chat_answer_when_done(
    request: Request,
    scheduler: Scheduler,
    job: Job,
    plan: ChatPlan,
    dialect: Dialect,
    body_of: Callable[[ChatAnswer], dict[str, Any]],
) -> Response:
    """The same for a chat request: the reply read back as text and tool calls first."""
    return await answer_when_done(
        request,
        scheduler,
        job,
        dialect,
        lambda text, outcome: body_of(read_answer(plan, text, outcome)),
    )


async def run_to_end(
    request: Request, scheduler: Scheduler, job: Job
) -> tuple[str, GenerationOutcome]:
    """Wait for a whole non-streamed answer; raises ClientDisconnectedError if the client left."""
    return await unless_disconnected(request, scheduler.collect(job))


class ToolChoiceMode(enum.Enum):
    NONE = "none"
    AUTO = "auto"  # the model is first asked whether it needs a tool
    REQUIRED = "required"  # a call of one of the tools, or of `name` when set


@dataclass(frozen=True, slots=True)
class ToolChoice:
    mode: ToolChoiceMode = ToolChoiceMode.AUTO
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ChatPlan:
    """A chat request ready for the scheduler, plus what reading its answer needs."""

    generation: GenerationRequest
    user_stops: tuple[str, ...]
    # The reply is a grammar-bound tool call (or plain text, if the model declined one).
    constrained_tools: bool = False
    # The model's own tool-call tags, parsed live (--jinjatools with a recognized template).
    live_tool_tags: tuple[str, str] | None = None


def plan_chat(
    template: ChatTemplate,
    dialect: Dialect,
    *,
    request_id: str,
    messages: Sequence[ChatMessage],
    max_tokens: int,
    sampling: SamplingParams,
    stop: Sequence[str] = (),
    tools: Sequence[ToolSpec] = (),
    tool_choice: ToolChoice = ToolChoice(),
    response_schema: dict[str, Any] | None = None,
    native_tools: bool = False,
    genkey: str = "",
) -> ChatPlan:
    """Render the conversation and decide how tool calls are produced.

    With `native_tools` (--jinjatools) and a template whose tool-call tags Hearth knows, the
    model's own format is used and calls stream live. Otherwise the reply is a JSON-schema-bound
    call; for "auto" the model is first asked, hidden, whether it needs one (KoboldCpp's
    pre-poll).
    """
    offer_tools = bool(tools) and tool_choice.mode is not ToolChoiceMode.NONE
    live_tags = template.tool_call_tags if offer_tools and native_tools else None
    schema = response_schema
    decision_prompt = None
    try:
        if live_tags is not None:
            rendered = template.render(messages, tools, native_tools=True)
        else:
            rendered = template.render(messages, tools if offer_tools else ())
        if offer_tools and live_tags is None:
            schema = tool_call_schema(tools, tool_choice.name)
            sampling = replace(
                sampling, temperature=min(sampling.temperature, _TOOL_CALL_MAX_TEMPERATURE)
            )
            if tool_choice.mode is ToolChoiceMode.AUTO and tool_choice.name is None:
                decision_prompt = template.render(
                    messages, tools, extra_user_turn=TOOL_DECISION_QUESTION
                ).prompt
    except ChatTemplateError as exc:
        raise APIError(400, str(exc), dialect=dialect) from None
    user_stops = tuple(s for s in stop if s)
    generation = GenerationRequest(
        request_id=request_id,
        prompt=rendered.prompt,
        max_tokens=max_tokens,
        sampling=sampling,
        stop=user_stops + rendered.stop,
        genkey=genkey,
        json_schema=schema,
        schema_decision_prompt=decision_prompt,
    )
    return ChatPlan(generation, user_stops, offer_tools and live_tags is None, live_tags)


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    """A finished chat reply: its text and the tool calls it made."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    outcome: GenerationOutcome


def read_answer(plan: ChatPlan, text: str, outcome: GenerationOutcome) -> ChatAnswer:
    """A whole reply (non-streamed) read back as text and tool calls."""
    if plan.live_tool_tags is not None:
        parser = ToolCallParser(*plan.live_tool_tags)
        parser.feed(text)
        parser.finish()
        return ChatAnswer("".join(parser.text_parts), tuple(parser.calls), outcome)
    if plan.constrained_tools and outcome.constrained:
        try:
            return ChatAnswer("", (parse_tool_call(text, new_call_id()),), outcome)
        except ValueError:
            pass  # cut off mid-call (max tokens): hand back what was generated as text
    return ChatAnswer(text, (), outcome)


def matched_user_stop(plan: ChatPlan, outcome: GenerationOutcome) -> str | None:
    """The user's own stop string that ended generation (not the template's end of turn)."""
    if outcome.stop_sequence is not None and outcome.stop_sequence in plan.user_stops:
        return outcome.stop_sequence
    return None


@dataclass(frozen=True, slots=True)
class ChatEnd:
    """The last item of a chat stream."""

    answer: ChatAnswer


async def chat_events(
    scheduler: Scheduler, job: Job, plan: ChatPlan, keepalive: float
) -> AsyncIterator[ChatStreamEvent | ChatEnd | None]:
    """A chat generation as dialect-neutral events; None while silent (send a keep-alive).

    Plain text streams token by token; tagged tool calls stream as parsed; a grammar-bound
    call is only known once complete, so it is buffered and then sent whole.
    """
    parser = ToolCallParser(*plan.live_tool_tags) if plan.live_tool_tags else None
    parts: list[str] = []
    async for event in scheduler.events(job, idle_timeout=keepalive):
        if event is None:
            yield None
        elif isinstance(event, TokenEvent):
            if parser is not None:
                for item in parser.feed(event.text):
                    yield item
            elif plan.constrained_tools:
                parts.append(event.text)
            else:
                parts.append(event.text)
                yield TextDelta(event.text)
        elif failed(event):
            yield ChatEnd(ChatAnswer("".join(parts), (), event))
        elif parser is not None:
            for item in parser.finish():
                yield item
            yield ChatEnd(ChatAnswer("".join(parser.text_parts), tuple(parser.calls), event))
        elif plan.constrained_tools:
            answer = read_answer(plan, "".join(parts), event)
            if answer.text:
                yield TextDelta(answer.text)
            for index, call in enumerate(answer.tool_calls):
                for item in whole_call_events(index, call):
                    yield item
            yield ChatEnd(answer)
        else:
            yield ChatEnd(ChatAnswer("".join(parts), (), event))


def failed(outcome: GenerationOutcome) -> bool:
    return outcome.finish_reason is FinishReason.ERROR


def failure_message(outcome: GenerationOutcome) -> str:
    return outcome.error or "generation failed"


# Which wire field of a dialect's request feeds which `SamplingParams` field. Each dialect
# states its own table; a new sampling field is one line in each, plus the core.
SamplingFields = Mapping[str, str]


def sampling_from(source: BaseModel, fields: SamplingFields) -> SamplingParams:
    """`SamplingParams` from `source`'s fields named in `fields` (wire name → core name); what
    a client omitted (None) keeps KoboldCpp's default, as KoboldCpp's own adapters do.

    Only declared (validated) fields are read: an unknown field of the same name, which the
    schemas accept unchecked, must never reach the engine."""
    declared = type(source).model_fields
    given = {
        core: value
        for wire, core in fields.items()
        if wire in declared and (value := getattr(source, wire)) is not None
    }
    return replace(SamplingParams(), **given)


def stop_list(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,) if stop else ()
    return tuple(s for s in stop if s)
