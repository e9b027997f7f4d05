"""Anthropic Messages requests → plans for the scheduler."""

from __future__ import annotations

from dataclasses import replace

from server.core.chat import ChatMessage, PromptEnd, ToolCall, ToolSpec
from server.dialects import common
from server.dialects.anthropic.schemas import (
    AnthropicBlock,
    AnthropicMessage,
    AnthropicMessagesRequest,
    AnthropicThinking,
    AnthropicTool,
    AnthropicToolChoice,
)
from server.dialects.common import ChatOptions, ChatPlan, ToolChoice, ToolChoiceMode
from server.dialects.errors import APIError, Dialect
from server.dialects.sampling import sampling_from
from server.dialects.thinking import ThinkingAsk

# Blocks that carry media: a text model cannot read them, and dropping them silently would
# answer a question about a picture without the picture.
_MEDIA_BLOCKS = frozenset({"image", "document"})


def _refuse_media(blocks: list[AnthropicBlock]) -> None:
    for block in blocks:
        inner = block.content if isinstance(block.content, list) else []
        kinds = {block.type} | {str(getattr(part, "type", "")) for part in inner}
        media = kinds & _MEDIA_BLOCKS
        if media:
            kind = sorted(media)[0]
            raise APIError(
                400,
                f"{kind} input is not supported: this model has no vision "
                "(send the content as text)",
                dialect=Dialect.ANTHROPIC,
            )


def chat_messages(
    system: str | list[AnthropicBlock] | None, messages: list[AnthropicMessage]
) -> list[ChatMessage]:
    """Anthropic turns → chat messages: tool_use blocks become calls, tool_result blocks
    become tool turns, text blocks are joined with a blank line between. Image and document
    blocks are a 400."""
    turns: list[ChatMessage] = []
    if system:
        turns.append(ChatMessage("system", common.text_of(system)))
    for message in messages:
        if isinstance(message.content, str):
            turns.append(ChatMessage(message.role, message.content))
            continue
        _refuse_media(message.content)
        text = common.text_of(message.content)  # a blank line between blocks, as llama-server
        thought = "".join(b.thinking or "" for b in message.content if b.type == "thinking")
        calls = tuple(
            ToolCall(b.id or "", b.name or "", b.input or {})
            for b in message.content
            if b.type == "tool_use"
        )
        for block in message.content:
            if block.type == "tool_result":
                turns.append(
                    ChatMessage(
                        "tool", common.text_of(block.content), tool_call_id=block.tool_use_id
                    )
                )
        if text or calls:
            turns.append(ChatMessage(message.role, text, tool_calls=calls, reasoning=thought))
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


def messages_plan(body: AnthropicMessagesRequest, options: ChatOptions) -> ChatPlan:
    messages = chat_messages(body.system, body.messages)
    # Anthropic's prefill: a final assistant message is the start of the reply, carried on.
    prefilled = bool(messages) and messages[-1].role == "assistant"
    plan = common.plan_chat(
        options,
        Dialect.ANTHROPIC,
        messages=messages,
        end=PromptEnd.CONTINUE if prefilled else PromptEnd.REPLY,
        max_tokens=body.max_tokens,
        sampling=sampling_from(body),
        stop=common.stop_list(body.stop_sequences),
        tools=tools_of(body.tools),
        tool_choice=tool_choice(body.tool_choice),
        thinking=thinking_ask(body.thinking),
    )
    if body.grammar is None or plan.generation.json_schema is not None:
        return plan
    return replace(plan, generation=replace(plan.generation, grammar=body.grammar))
