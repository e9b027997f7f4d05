"""Anthropic endpoints: /v1/messages (streamed or not) and /v1/messages/count_tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import ValidationError

from server.dialects.anthropic import adapter
from server.dialects.anthropic.formatter import MessageWire
from server.dialects.anthropic.schemas import (
    AnthropicCountTokensRequest,
    AnthropicMessageObject,
    AnthropicMessagesRequest,
    InputTokenCount,
)
from server.dialects.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.errors import APIError, Dialect, describe_validation_error, parse_json_body
from server.dialects.openapi import json_body
from server.dialects.respond import Generation, Served, generation_route, named_model

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
async def count_tokens(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> InputTokenCount:
    """The prompt tokens /v1/messages would send for the same body (its `usage.input_tokens`
    when nothing has to be cut to fit): planned the same way, tools and all."""
    body = await parse_json_body(request, AnthropicCountTokensRequest, Dialect.ANTHROPIC)
    model = await named_model(request, scheduler, model, body.model, Dialect.ANTHROPIC)
    try:  # the fields /v1/messages also reads (tool_choice...) must be valid for it too
        as_message = AnthropicMessagesRequest.model_validate(
            {**body.model_dump(exclude_unset=True), "max_tokens": 1}
        )
    except ValidationError as exc:
        raise APIError(400, describe_validation_error(exc), dialect=Dialect.ANTHROPIC) from None
    plan = adapter.messages_plan(as_message, Served(request, settings, model).chat_options("msg_"))
    generation = plan.generation
    return {"input_tokens": len(model.tokenizer.tokenize(generation.memory + generation.prompt))}
