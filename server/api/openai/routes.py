"""OpenAI endpoints: /v1/completions, /v1/chat/completions, /v1/responses, /v1/models.

Chat and completions streams are `data:` lines only (no `event:` names: older openai-python
versions mangle named events) ending with `data: [DONE]`; Responses streams name every event
and end with `response.completed` even when cut off, with `incomplete_details` saying so, since
the SDK's `get_final_response()` accepts nothing else.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sse_starlette import ServerSentEvent

from server.api import common
from server.api.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.api.errors import Dialect, ErrorKind, error_body, parse_json_body
from server.api.openai import adapter
from server.api.openai.schemas import OpenAIChatRequest, OpenAICompletionRequest, ResponsesRequest
from server.api.openapi import json_body
from server.core.scheduler import Job, Scheduler
from server.core.tool_stream import TextDelta, ToolArgumentsDelta, ToolCallDone, ToolCallStart
from server.core.types import GenerationOutcome, TokenEvent
from server.streaming import sse_response

router = APIRouter(tags=["OpenAI"])
RequireKey = key_required(Dialect.OPENAI)
DONE = ServerSentEvent("[DONE]")


def _data(payload: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(json.dumps(payload))


def _error_data(outcome: GenerationOutcome) -> ServerSentEvent:
    return _data(error_body(Dialect.OPENAI, common.failure_message(outcome), ErrorKind.SERVER))


@router.get("/v1/models")
async def list_models(model: ModelInfoDep) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": model.name, "object": "model", "created": 0, "owned_by": "hearth"}],
    }


# -- /v1/completions -------------------------------------------------------------------------


@router.post(
    "/v1/completions", dependencies=[RequireKey], openapi_extra=json_body(OpenAICompletionRequest)
)
async def completions(request: Request, scheduler: SchedulerDep, model: ModelInfoDep) -> Response:
    body = await parse_json_body(request, OpenAICompletionRequest, Dialect.OPENAI)
    completion_id = common.new_id("cmpl-")
    job = common.submit(
        scheduler, model, adapter.completion_generation(body, completion_id), Dialect.OPENAI
    )
    created = int(time.time())
    if body.stream:
        return sse_response(
            _completion_events(request, scheduler, job, body, model.name), drop_when=job.abandoned
        )
    return await common.answer_when_done(
        request,
        scheduler,
        job,
        Dialect.OPENAI,
        lambda text, outcome: {
            **adapter.completion_object(
                completion_id, model.name, created, text, adapter.finish_reason(outcome)
            ),
            "usage": adapter.usage(outcome),
        },
    )


async def _completion_events(
    request: Request, scheduler: Scheduler, job: Job, body: OpenAICompletionRequest, model: str
) -> AsyncIterator[ServerSentEvent | None]:
    completion_id, created = job.request.request_id, int(time.time())
    async for event in scheduler.events(job, idle_timeout=request.app.state.keepalive_seconds):
        if event is None:
            yield None
        elif isinstance(event, TokenEvent):
            yield _data(adapter.completion_object(completion_id, model, created, event.text, None))
        elif common.failed(event):
            yield _error_data(event)
        else:
            yield _data(
                adapter.completion_object(
                    completion_id, model, created, "", adapter.finish_reason(event)
                )
            )
            if body.include_usage:
                yield _data(
                    {
                        **adapter.completion_object(completion_id, model, created, "", None),
                        "choices": [],
                        "usage": adapter.usage(event),
                    }
                )
    yield DONE


# -- /v1/chat/completions --------------------------------------------------------------------


@router.post(
    "/v1/chat/completions", dependencies=[RequireKey], openapi_extra=json_body(OpenAIChatRequest)
)
async def chat_completions(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    body = await parse_json_body(request, OpenAIChatRequest, Dialect.OPENAI)
    plan = adapter.chat_plan(
        body,
        model.chat_template,
        common.new_id("chatcmpl-"),
        settings.defaultgenamt,
        settings.jinja_tools,
    )
    job = common.submit(scheduler, model, plan.generation, Dialect.OPENAI)
    if body.stream:
        return sse_response(
            _chat_events(request, scheduler, job, plan, body, model.name), drop_when=job.abandoned
        )
    return await common.chat_answer_when_done(
        request,
        scheduler,
        job,
        plan,
        Dialect.OPENAI,
        lambda answer: adapter.chat_completion(
            plan.generation.request_id, model.name, int(time.time()), answer
        ),
    )


async def _chat_events(
    request: Request,
    scheduler: Scheduler,
    job: Job,
    plan: common.ChatPlan,
    body: OpenAIChatRequest,
    model: str,
) -> AsyncIterator[ServerSentEvent | None]:
    chunks = adapter.ChatChunks(plan.generation.request_id, model)
    yield _data(chunks.role())
    keepalive = request.app.state.keepalive_seconds
    async for item in common.chat_events(scheduler, job, plan, keepalive):
        if item is None:
            yield None
        elif isinstance(item, TextDelta):
            yield _data(chunks.content(item.text))
        elif isinstance(item, ToolCallStart):
            yield _data(chunks.tool_call_start(item))
        elif isinstance(item, ToolArgumentsDelta):
            yield _data(chunks.tool_call_arguments(item))
        elif isinstance(item, common.ChatEnd):
            outcome = item.answer.outcome
            if common.failed(outcome):
                yield _error_data(outcome)  # openai-python raises APIError on this
            else:
                reason = adapter.finish_reason(outcome, bool(item.answer.tool_calls))
                yield _data(chunks.finish(reason))
                if body.include_usage:
                    yield _data(chunks.usage(outcome))
    yield DONE


# -- /v1/responses ---------------------------------------------------------------------------


@router.post("/v1/responses", dependencies=[RequireKey], openapi_extra=json_body(ResponsesRequest))
async def responses(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    body = await parse_json_body(request, ResponsesRequest, Dialect.OPENAI)
    response_id = common.new_id("resp_")
    plan = adapter.responses_plan(
        body, model.chat_template, response_id, settings.defaultgenamt, settings.jinja_tools
    )
    job = common.submit(scheduler, model, plan.generation, Dialect.OPENAI)
    builder = adapter.ResponseBuilder(response_id, model.name, body)
    if body.stream:
        return sse_response(
            _responses_events(request, scheduler, job, plan, builder), drop_when=job.abandoned
        )
    return await common.chat_answer_when_done(
        request,
        scheduler,
        job,
        plan,
        Dialect.OPENAI,
        lambda answer: builder.response("completed", builder.output_for(answer), answer.outcome),
    )


def _named(event: tuple[str, dict[str, Any]]) -> ServerSentEvent:
    name, payload = event
    return ServerSentEvent(json.dumps(payload), event=name)


async def _responses_events(
    request: Request,
    scheduler: Scheduler,
    job: Job,
    plan: common.ChatPlan,
    builder: adapter.ResponseBuilder,
) -> AsyncIterator[ServerSentEvent | None]:
    keepalive = request.app.state.keepalive_seconds
    started = builder.response("in_progress", [])
    yield _named(builder.event("response.created", response=started))
    yield _named(builder.event("response.in_progress", response=started))
    output: list[dict[str, Any]] = []  # finished output items, in output_index order
    message: _OpenMessage | None = None
    calls: dict[int, tuple[int, ToolCallStart]] = {}  # tool index -> (output_index, start)
    async for item in common.chat_events(scheduler, job, plan, keepalive):
        if item is None:
            yield None
        elif isinstance(item, TextDelta):
            if message is None:
                message = _OpenMessage(len(output))
                for event in message.open(builder):
                    yield event
            yield message.delta(builder, item.text)
        elif isinstance(item, ToolCallStart):
            if message is not None:
                for event in message.close(builder, output):
                    yield event
                message = None
            calls[item.index] = (len(output), item)
            output.append({})  # its place, filled when the call is done
            pending = builder.function_call_item(item.call_id, item.name, "", "in_progress")
            yield _named(
                builder.event(
                    "response.output_item.added", output_index=len(output) - 1, item=pending
                )
            )
        elif isinstance(item, ToolArgumentsDelta):
            output_index, start = calls[item.index]
            yield _named(
                builder.event(
                    "response.function_call_arguments.delta",
                    output_index=output_index,
                    item_id=builder.function_call_item(start.call_id, start.name, "")["id"],
                    delta=item.fragment,
                )
            )
        elif isinstance(item, ToolCallDone):
            output_index, start = calls[item.index]
            arguments = json.dumps(item.call.arguments)
            done = builder.function_call_item(start.call_id, start.name, arguments)
            output[output_index] = done
            yield _named(
                builder.event(
                    "response.function_call_arguments.done",
                    output_index=output_index,
                    item_id=done["id"],
                    name=start.name,
                    arguments=arguments,
                )
            )
            yield _named(
                builder.event("response.output_item.done", output_index=output_index, item=done)
            )
        else:
            outcome = item.answer.outcome
            if common.failed(outcome):
                for event in _failure_events(builder, outcome):
                    yield event
                return
            if message is None and not output:
                message = _OpenMessage(0)
                for event in message.open(builder):
                    yield event
            if message is not None:
                for event in message.close(builder, output):
                    yield event
            yield _named(
                builder.event(
                    "response.completed", response=builder.response("completed", output, outcome)
                )
            )


class _OpenMessage:
    """The assistant message item of a Responses stream while its text arrives."""

    def __init__(self, output_index: int) -> None:
        self.output_index = output_index
        self.parts: list[str] = []

    def _ids(self, builder: adapter.ResponseBuilder) -> dict[str, Any]:
        return {
            "item_id": builder.message_id,
            "output_index": self.output_index,
            "content_index": 0,
        }

    def open(self, builder: adapter.ResponseBuilder) -> list[ServerSentEvent]:
        return [
            _named(
                builder.event(
                    "response.output_item.added",
                    output_index=self.output_index,
                    item=builder.message_item("", "in_progress"),
                )
            ),
            _named(
                builder.event(
                    "response.content_part.added",
                    **self._ids(builder),
                    part={"type": "output_text", "text": "", "annotations": []},
                )
            ),
        ]

    def delta(self, builder: adapter.ResponseBuilder, text: str) -> ServerSentEvent:
        self.parts.append(text)
        return _named(
            builder.event(
                "response.output_text.delta", **self._ids(builder), delta=text, logprobs=[]
            )
        )

    def close(
        self, builder: adapter.ResponseBuilder, output: list[dict[str, Any]]
    ) -> list[ServerSentEvent]:
        text = "".join(self.parts)
        item = builder.message_item(text)
        output.insert(self.output_index, item)
        return [
            _named(
                builder.event(
                    "response.output_text.done", **self._ids(builder), text=text, logprobs=[]
                )
            ),
            _named(
                builder.event(
                    "response.content_part.done",
                    **self._ids(builder),
                    part={"type": "output_text", "text": text, "annotations": []},
                )
            ),
            _named(
                builder.event(
                    "response.output_item.done", output_index=self.output_index, item=item
                )
            ),
        ]


def _failure_events(
    builder: adapter.ResponseBuilder, outcome: GenerationOutcome
) -> list[ServerSentEvent]:
    message = common.failure_message(outcome)
    error = {"code": "server_error", "message": message}
    return [
        _named(builder.event("error", code="server_error", message=message, param=None)),
        _named(
            builder.event(
                "response.failed", response=builder.response("failed", [], outcome, error)
            )
        ),
    ]
