"""Anthropic Messages requests → plans for the scheduler."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from server.core.templates.chat import ChatMessage, PromptEnd, ToolCall, ToolSpec
from server.core.types import MediaInput
from server.dialects.anthropic.schemas import (
    AnthropicBlock,
    AnthropicMessage,
    AnthropicMessagesRequest,
    AnthropicThinking,
    AnthropicTool,
    AnthropicToolChoice,
)
from server.dialects.chat import plans, request_fields
from server.dialects.chat.plans import ChatOptions, ChatPlan, ToolChoice, ToolChoiceMode
from server.dialects.chat.thinking import ThinkingAsk
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.edge.sampling import sampling_from
from server.dialects.media.media import media_from_base64, media_from_url
from server.dialects.media.media_parts import text_and_media

_ANTHROPIC = Dialect.ANTHROPIC


def block_media(block: object, where: str) -> MediaInput | None:
    """An image block's image (base64 source; a URL source only when --remoteimages allows
    its host: remote_media.py has fetched it into a data: URI by now), checked; None for
    other blocks. A document block is a 400: Hearth reads no PDFs."""
    kind = getattr(block, "type", "")
    if kind == "document":
        raise APIError(
            400, f"{where}: document input is not supported (send its text)", dialect=_ANTHROPIC
        )
    if kind != "image":
        return None
    source = getattr(block, "source", None) or {}
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return media_from_url(source["url"], _ANTHROPIC, where=where)
    data = source.get("data")
    if source.get("type") != "base64" or not isinstance(data, str) or not data:
        raise APIError(400, f"{where}: an image block needs a base64 source", dialect=_ANTHROPIC)
    declared = source.get("media_type")
    return media_from_base64(
        data, _ANTHROPIC, declared=declared if isinstance(declared, str) else None, where=where
    )


def chat_messages(
    system: str | list[AnthropicBlock] | None, messages: list[AnthropicMessage]
) -> list[ChatMessage]:
    """Anthropic turns → chat messages: tool_use blocks become calls, tool_result blocks
    become tool turns, text blocks are joined with a blank line between, an image block
    stands among them as its marker (also inside a tool_result); document blocks are a 400."""
    turns: list[ChatMessage] = []
    if system:
        turns.append(ChatMessage("system", request_fields.text_of(system)))
    for number, message in enumerate(messages):
        if isinstance(message.content, str):
            turns.append(ChatMessage(message.role, message.content))
            continue
        where = f"messages[{number}]"
        # a blank line between blocks, as llama-server joins them
        text, media = text_and_media(message.content, block_media, where)
        thought = "".join(b.thinking or "" for b in message.content if b.type == "thinking")
        calls = tuple(
            ToolCall(b.id or "", b.name or "", b.input or {})
            for b in message.content
            if b.type == "tool_use"
        )
        for index, block in enumerate(message.content):
            if block.type == "tool_result":
                inner = f"{where}.content[{index}]"
                result, shown = text_and_media(block.content, block_media, inner)
                turns.append(
                    ChatMessage("tool", result, tool_call_id=block.tool_use_id, media=shown)
                )
        if text or calls or media:
            turns.append(
                ChatMessage(message.role, text, tool_calls=calls, reasoning=thought, media=media)
            )
    return turns


def thinking_ask(thinking: AnthropicThinking | None) -> ThinkingAsk:
    """`thinking` enabled (with its budget), adaptive (no budget) or disabled; absent: the
    server's defaults (a local model that thinks anyway still shows its thinking block)."""
    if thinking is None:
        return ThinkingAsk()
    if thinking.type == "disabled":
        return ThinkingAsk(enabled=False)
    return ThinkingAsk(enabled=True, budget=thinking.budget_tokens)


def tools_of(tools: list[AnthropicTool] | None) -> list[ToolSpec]:
    return [ToolSpec(t.name, t.description, t.input_schema) for t in tools or ()]


def tool_choice(choice: AnthropicToolChoice | None) -> ToolChoice:
    if choice is None or choice.type == "auto":
        return ToolChoice()
    if choice.type == "none":
        return ToolChoice(ToolChoiceMode.NONE)
    if choice.type == "tool":
        return ToolChoice(ToolChoiceMode.REQUIRED, choice.name)
    return ToolChoice(ToolChoiceMode.REQUIRED)


def output_schema(body: AnthropicMessagesRequest) -> dict[str, Any] | None:
    """The JSON schema the reply must follow: `output_config.format` (structured outputs), or
    the beta's top-level `output_format`; None when neither binds the reply. Its type and
    shape are checked by the schema model; one no grammar can be made from is refused, like
    every dialect's, when the request is admitted (a 400 invalid_request_error)."""
    config = body.output_config
    chosen = (config.format if config is not None else None) or body.output_format
    return None if chosen is None else chosen.json_schema


def messages_plan(body: AnthropicMessagesRequest, options: ChatOptions) -> ChatPlan:
    messages = chat_messages(body.system, body.messages)
    # Anthropic's prefill: a final assistant message is the start of the reply, carried on.
    prefilled = bool(messages) and messages[-1].role == "assistant"
    plan = plans.plan_chat(
        options,
        Dialect.ANTHROPIC,
        messages=messages,
        end=PromptEnd.CONTINUE if prefilled else PromptEnd.REPLY,
        max_tokens=body.max_tokens,
        sampling=sampling_from(body),
        stop=request_fields.stop_list(body.stop_sequences),
        tools=tools_of(body.tools),
        tool_choice=tool_choice(body.tool_choice),
        response_schema=output_schema(body),
        thinking=thinking_ask(body.thinking),
    )
    if body.grammar is None or plan.generation.json_schema is not None:
        return plan
    return replace(plan, generation=replace(plan.generation, grammar=body.grammar))
