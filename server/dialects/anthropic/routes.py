"""Anthropic endpoints: /v1/messages (streamed or not) and /v1/messages/count_tokens."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import ValidationError

from server.dialects.anthropic import adapter
from server.dialects.anthropic.formatter import MessageWire
from server.dialects.anthropic.schemas import (
    AnthropicCountTokensRequest,
    AnthropicMessageObject,
    AnthropicMessagesRequest,
    InputTokenCount,
)
from server.dialects.edge.errors import APIError, Dialect, describe_validation_error
from server.dialects.pipeline.routing import Generation, Served, generation_route, json_route

router = APIRouter(tags=["Anthropic"])


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


@json_route(
    router,
    "/v1/messages/count_tokens",
    AnthropicCountTokensRequest,
    Dialect.ANTHROPIC,
    names_model=True,
)
async def count_tokens(body: AnthropicCountTokensRequest, served: Served) -> InputTokenCount:
    """The prompt tokens /v1/messages would send for the same body (its `usage.input_tokens`
    when nothing has to be cut to fit): planned the same way, tools and all."""
    try:  # the fields /v1/messages also reads (tool_choice...) must be valid for it too
        as_message = AnthropicMessagesRequest.model_validate(
            {**body.model_dump(exclude_unset=True, by_alias=True), "max_tokens": 1}
        )
    except ValidationError as exc:
        raise APIError(400, describe_validation_error(exc), dialect=Dialect.ANTHROPIC) from None
    plan = adapter.messages_plan(as_message, served.chat_options("msg_"))
    schema = plan.generation.json_schema
    if schema is not None:  # refused as /v1/messages would refuse it
        try:
            served.model.schemas.check_json_schema(schema)
        except ValueError as exc:
            raise APIError(400, f"Unusable JSON schema: {exc}", dialect=Dialect.ANTHROPIC) from None
    return {"input_tokens": served.prompt_size(plan)}
