"""Anthropic endpoints: /v1/messages (streamed or not) and /v1/messages/count_tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request

from server.api.anthropic import adapter
from server.api.anthropic.formatter import MessageWire
from server.api.anthropic.schemas import (
    AnthropicCountTokensRequest,
    AnthropicMessageObject,
    AnthropicMessagesRequest,
    InputTokenCount,
)
from server.api.deps import ModelInfoDep, key_required
from server.api.errors import APIError, Dialect, parse_json_body
from server.api.openapi import json_body
from server.api.respond import Generation, Served, generation_route
from server.core.chat import ChatTemplateError

router = APIRouter(tags=["Anthropic"])
RequireKey = key_required(Dialect.ANTHROPIC)


@generation_route(
    router, "/v1/messages", AnthropicMessagesRequest, AnthropicMessageObject, Dialect.ANTHROPIC
)
def messages(body: AnthropicMessagesRequest, served: Served) -> Generation:
    plan = adapter.messages_plan(body, served.chat_options("msg_"))
    # Only a stream needs the prompt's size before generation (in message_start).
    model = served.model
    input_tokens = model.tokenizer.count_prompt_tokens(plan.generation) if body.stream else 0
    wire = MessageWire(plan.generation.request_id, model.name, plan, input_tokens)
    return Generation(plan, wire, body.stream)


@router.post(
    "/v1/messages/count_tokens",
    dependencies=[RequireKey],
    openapi_extra=json_body(AnthropicCountTokensRequest),
)
async def count_tokens(request: Request, model: ModelInfoDep) -> InputTokenCount:
    body = await parse_json_body(request, AnthropicCountTokensRequest, Dialect.ANTHROPIC)
    try:
        rendered = model.chat_template.render(
            adapter.chat_messages(body.system, body.messages), adapter.tools_of(body.tools)
        )
    except ChatTemplateError as exc:
        raise APIError(400, str(exc), dialect=Dialect.ANTHROPIC) from None
    return {"input_tokens": len(model.tokenizer.tokenize(rendered.prompt))}
