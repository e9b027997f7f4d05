"""Anthropic requests → core requests, and answers → Message objects and stream events."""

from __future__ import annotations

import json
from typing import Any

from server.api.anthropic.schemas import (
    AnthropicBlock,
    AnthropicMessage,
    AnthropicMessagesRequest,
    AnthropicTool,
    AnthropicToolChoice,
)
from server.api.common import (
    ChatAnswer,
    ChatPlan,
    SamplingFields,
    ToolChoice,
    ToolChoiceMode,
    matched_user_stop,
    plan_chat,
    sampling_from,
    stop_list,
)
from server.api.errors import Dialect
from server.core.chat import ChatMessage, ChatTemplate, ToolCall, ToolSpec
from server.core.types import FinishReason


def _blocks_text(content: str | list[Any] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(
        getattr(block, "text", None) or ""
        for block in content
        if getattr(block, "type", "text") == "text"
    )


SAMPLING_FIELDS: SamplingFields = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}


def chat_messages(
    system: str | list[AnthropicBlock] | None, messages: list[AnthropicMessage]
) -> list[ChatMessage]:
    """Anthropic turns → chat messages: tool_use blocks become calls, tool_result blocks
    become tool turns, text blocks are joined."""
    turns: list[ChatMessage] = []
    if system:
        turns.append(ChatMessage("system", _blocks_text(system)))
    for message in messages:
        if isinstance(message.content, str):
            turns.append(ChatMessage(message.role, message.content))
            continue
        text = "".join(b.text or "" for b in message.content if b.type == "text")
        calls = tuple(
            ToolCall(b.id or "", b.name or "", b.input or {})
            for b in message.content
            if b.type == "tool_use"
        )
        for block in message.content:
            if block.type == "tool_result":
                turns.append(
                    ChatMessage("tool", _blocks_text(block.content), tool_call_id=block.tool_use_id)
                )
        if text or calls:
            turns.append(ChatMessage(message.role, text, tool_calls=calls))
    return turns


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


def messages_plan(
    body: AnthropicMessagesRequest,
    template: ChatTemplate,
    request_id: str,
    native_tools: bool = False,
) -> ChatPlan:
    return plan_chat(
        template,
        Dialect.ANTHROPIC,
        request_id=request_id,
        messages=chat_messages(body.system, body.messages),
        max_tokens=body.max_tokens,
        sampling=sampling_from(body, SAMPLING_FIELDS),
        stop=stop_list(body.stop_sequences),
        tools=tools_of(body.tools),
        tool_choice=tool_choice(body.tool_choice),
        native_tools=native_tools,
    )


def stop_reason(plan: ChatPlan, answer: ChatAnswer) -> str:
    if answer.tool_calls:
        return "tool_use"
    if answer.outcome.finish_reason is FinishReason.LENGTH:
        return "max_tokens"
    if matched_user_stop(plan, answer.outcome) is not None:
        return "stop_sequence"
    return "end_turn"


def tool_use_id(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_")


def tool_use_block(call: ToolCall) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": tool_use_id(call.id),
        "name": call.name,
        "input": call.arguments,
    }


def message_object(
    message_id: str, model: str, plan: ChatPlan, answer: ChatAnswer
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.text or not answer.tool_calls:
        content.append({"type": "text", "text": answer.text})
    content += [tool_use_block(call) for call in answer.tool_calls]
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(plan, answer),
        "stop_sequence": matched_user_stop(plan, answer.outcome),
        "usage": {
            "input_tokens": answer.outcome.prompt_tokens,
            "output_tokens": answer.outcome.completion_tokens,
            "cache_read_input_tokens": answer.outcome.reused_prompt_tokens,
        },
    }


def event(kind: str, **fields: Any) -> tuple[str, str]:
    """An SSE event: the name and the `type` inside the data always agree."""
    return kind, json.dumps({"type": kind, **fields})


def message_start(message_id: str, model: str, input_tokens: int) -> tuple[str, str]:
    return event(
        "message_start",
        message={
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0},
        },
    )
