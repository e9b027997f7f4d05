"""Anthropic endpoints: /v1/messages (streamed or not) and /v1/messages/count_tokens.

Every stream event carries its SSE name (the SDK drops unnamed events) and the same `type` in
its data. A failure after the stream began is Anthropic's `event: error`, which the SDK raises.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sse_starlette import ServerSentEvent

from server.api import common
from server.api.anthropic import adapter
from server.api.anthropic.schemas import AnthropicCountTokensRequest, AnthropicMessagesRequest
from server.api.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.api.errors import APIError, Dialect, ErrorKind, error_body, parse_json_body
from server.api.openapi import json_body
from server.core.chat import ChatTemplateError
from server.core.scheduler import Job, Scheduler
from server.core.tool_stream import TextDelta, ToolArgumentsDelta, ToolCallDone, ToolCallStart
from server.core.types import GenerationOutcome
from server.streaming import sse_response

router = APIRouter(tags=["Anthropic"])
RequireKey = key_required(Dialect.ANTHROPIC)


def _sse(named: tuple[str, str]) -> ServerSentEvent:
    name, data = named
    return ServerSentEvent(data, event=name)


@router.post(
    "/v1/messages", dependencies=[RequireKey], openapi_extra=json_body(AnthropicMessagesRequest)
)
async def messages(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    body = await parse_json_body(request, AnthropicMessagesRequest, Dialect.ANTHROPIC)
    message_id = common.new_id("msg_")
    plan = adapter.messages_plan(body, model.chat_template, message_id, settings.jinja_tools)
    job = common.submit(scheduler, model, plan.generation, Dialect.ANTHROPIC)
    if body.stream:
        # As the real API: message_start already carries the prompt's size.
        input_tokens = model.tokenizer.count_prompt_tokens(plan.generation)
        return sse_response(
            _message_events(request, scheduler, job, plan, model.name, input_tokens),
            drop_when=job.abandoned,
        )
    return await common.chat_answer_when_done(
        request,
        scheduler,
        job,
        plan,
        Dialect.ANTHROPIC,
        lambda answer: adapter.message_object(message_id, model.name, plan, answer),
    )


@router.post(
    "/v1/messages/count_tokens",
    dependencies=[RequireKey],
    openapi_extra=json_body(AnthropicCountTokensRequest),
)
async def count_tokens(request: Request, model: ModelInfoDep) -> dict[str, Any]:
    body = await parse_json_body(request, AnthropicCountTokensRequest, Dialect.ANTHROPIC)
    try:
        rendered = model.chat_template.render(
            adapter.chat_messages(body.system, body.messages), adapter.tools_of(body.tools)
        )
    except ChatTemplateError as exc:
        raise APIError(400, str(exc), dialect=Dialect.ANTHROPIC) from None
    return {"input_tokens": len(model.tokenizer.tokenize(rendered.prompt))}


async def _message_events(
    request: Request,
    scheduler: Scheduler,
    job: Job,
    plan: common.ChatPlan,
    model: str,
    input_tokens: int,
) -> AsyncIterator[ServerSentEvent | None]:
    message_id = job.request.request_id
    keepalive = request.app.state.keepalive_seconds
    yield _sse(adapter.message_start(message_id, model, input_tokens))
    blocks = 0  # content blocks opened so far; the open one is blocks - 1
    text_open = False
    async for item in common.chat_events(scheduler, job, plan, keepalive):
        if item is None:
            yield None
        elif isinstance(item, TextDelta):
            if not text_open:
                yield _start_text(blocks)
                blocks, text_open = blocks + 1, True
            yield _sse(
                adapter.event(
                    "content_block_delta",
                    index=blocks - 1,
                    delta={"type": "text_delta", "text": item.text},
                )
            )
        elif isinstance(item, ToolCallStart):
            if text_open:
                yield _sse(adapter.event("content_block_stop", index=blocks - 1))
                text_open = False
            yield _sse(
                adapter.event(
                    "content_block_start",
                    index=blocks,
                    content_block={
                        "type": "tool_use",
                        "id": adapter.tool_use_id(item.call_id),
                        "name": item.name,
                        "input": {},
                    },
                )
            )
            blocks += 1
        elif isinstance(item, ToolArgumentsDelta):
            yield _sse(
                adapter.event(
                    "content_block_delta",
                    index=blocks - 1,
                    delta={"type": "input_json_delta", "partial_json": item.fragment},
                )
            )
        elif isinstance(item, ToolCallDone):
            yield _sse(adapter.event("content_block_stop", index=blocks - 1))
        else:
            answer = item.answer
            if common.failed(answer.outcome):
                # The SDK raises on `error`; other clients still see the message end.
                yield _error(answer.outcome)
                yield _sse(adapter.event("message_stop"))
                return
            if blocks == 0:  # an empty reply still has its (empty) text block
                yield _start_text(0)
                blocks, text_open = 1, True
            if text_open:
                yield _sse(adapter.event("content_block_stop", index=blocks - 1))
            yield _sse(
                adapter.event(
                    "message_delta",
                    delta={
                        "stop_reason": adapter.stop_reason(plan, answer),
                        "stop_sequence": common.matched_user_stop(plan, answer.outcome),
                    },
                    usage={
                        "input_tokens": answer.outcome.prompt_tokens,
                        "output_tokens": answer.outcome.completion_tokens,
                    },
                )
            )
            yield _sse(adapter.event("message_stop"))


def _start_text(index: int) -> ServerSentEvent:
    return _sse(
        adapter.event(
            "content_block_start", index=index, content_block={"type": "text", "text": ""}
        )
    )


def _error(outcome: GenerationOutcome) -> ServerSentEvent:
    body = error_body(Dialect.ANTHROPIC, common.failure_message(outcome), ErrorKind.SERVER)
    return ServerSentEvent(json.dumps(body), event="error")
