"""Answers and stream events in Anthropic's Messages shapes.

Every stream event carries its SSE name (the SDK drops unnamed events) and the same `type` in
its data. A failure after the stream began is Anthropic's `event: error`, which the SDK raises;
other clients still see the message end. A thinking model's thought is a `thinking` block
before the text, its signature empty (a local model has none to give; llama-server's way).
"""

from __future__ import annotations

from sse_starlette import ServerSentEvent

from server.core.templates.chat import ToolCall
from server.core.tool_calls.tool_stream import (
    ChatStreamEvent,
    ReasoningDelta,
    TextDelta,
    ToolArgumentsDelta,
    ToolCallDone,
    ToolCallStart,
)
from server.core.types import FinishReason
from server.dialects.anthropic.schemas import (
    AnthropicMessageObject,
    ContentBlock,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    InputJSONDelta,
    MessageDelta,
    MessageStart,
    MessageStop,
    Ping,
    SignatureDelta,
    TextDeltaBody,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from server.dialects.chat.answers import ChatAnswer
from server.dialects.chat.plans import ChatPlan, matched_user_stop
from server.dialects.edge.errors import Dialect
from server.dialects.streams.wire import SSEFormat, sse_typed


def stop_reason(plan: ChatPlan, answer: ChatAnswer) -> str:
    if answer.outcome.finish_reason is FinishReason.LENGTH:
        return "max_tokens"  # a tool_use cut off too: its input may be incomplete
    if answer.tool_calls:
        return "tool_use"
    if matched_user_stop(plan, answer.outcome) is not None:
        return "stop_sequence"
    return "end_turn"


def tool_use_id(call_id: str) -> str:
    return "toolu_" + call_id.removeprefix("call_")


def tool_use_block(call: ToolCall) -> ToolUseBlock:
    return {
        "type": "tool_use",
        "id": tool_use_id(call.id),
        "name": call.name,
        "input": call.arguments,
    }


_MESSAGE_STOP: MessageStop = {"type": "message_stop"}
_PING: Ping = {"type": "ping"}


class MessageWire(SSEFormat):
    """One /v1/messages answer; streamed, its content blocks are opened and closed in turn."""

    dialect = Dialect.ANTHROPIC
    error_event = "error"  # Anthropic's own error event, which the SDK raises

    def __init__(self, message_id: str, model: str, plan: ChatPlan, input_tokens: int) -> None:
        self._id = message_id
        self._model = model
        self._plan = plan
        self._input_tokens = input_tokens  # as the real API, message_start carries it
        self._blocks = 0  # content blocks opened so far; the open one is blocks - 1
        self._text_open = False
        self._thinking_open = False
        self._answered = False  # a text or tool_use block was opened

    def _message(
        self, content: list[ContentBlock], answer: ChatAnswer | None
    ) -> AnthropicMessageObject:
        """The Message object: whole, or empty for message_start (answer None)."""
        outcome = None if answer is None else answer.outcome
        return {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": content,
            "stop_reason": None if answer is None else stop_reason(self._plan, answer),
            "stop_sequence": None if outcome is None else matched_user_stop(self._plan, outcome),
            "usage": {
                "input_tokens": self._input_tokens if outcome is None else outcome.prompt_tokens,
                "output_tokens": 0 if outcome is None else outcome.completion_tokens,
            },
        }

    def whole(self, answer: ChatAnswer) -> AnthropicMessageObject:
        content: list[ContentBlock] = []
        if answer.reasoning:
            content.append(_thinking_block(answer.reasoning))
        if answer.text or not answer.tool_calls:
            content.append({"type": "text", "text": answer.text})
        content += [tool_use_block(call) for call in answer.tool_calls]
        message = self._message(content, answer)
        message["usage"]["cache_read_input_tokens"] = answer.outcome.reused_prompt_tokens
        return message

    def keepalive(self) -> list[ServerSentEvent]:
        return [sse_typed(_PING)]  # the real API's keep-alive; its SDK skips it

    def opening(self) -> list[ServerSentEvent]:
        start: MessageStart = {"type": "message_start", "message": self._message([], None)}
        return [sse_typed(start)]

    def event(self, item: ChatStreamEvent) -> list[ServerSentEvent]:
        match item:
            case ReasoningDelta(text=text):
                opened = [] if self._thinking_open else self._start_block(_thinking_block(""))
                self._thinking_open = True
                closed = self._close_text() if opened else []
                return [*closed, *opened, self._delta({"type": "thinking_delta", "thinking": text})]
            case TextDelta(text=text):
                closed = self._close_thinking()
                opened = [] if self._text_open else self._start_block({"type": "text", "text": ""})
                self._text_open = True
                return [*closed, *opened, self._delta({"type": "text_delta", "text": text})]
            case ToolCallStart(call_id=call_id, name=name):
                closed = [*self._close_thinking(), *self._close_text()]
                block: ToolUseBlock = {
                    "type": "tool_use",
                    "id": tool_use_id(call_id),
                    "name": name,
                    "input": {},
                }
                return [*closed, *self._start_block(block)]
            case ToolArgumentsDelta(fragment=fragment):
                return [self._delta({"type": "input_json_delta", "partial_json": fragment})]
            case ToolCallDone():
                return [self._stop_block()]
        return []

    def after_failure(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        return [sse_typed(_MESSAGE_STOP)]  # other clients still see the message end

    def finished(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        events = self._close_thinking()
        if not self._answered:  # an empty reply still has its (empty) text block
            events += self._start_block({"type": "text", "text": ""})
            self._text_open = True
        events += self._close_text()
        outcome = answer.outcome
        delta: MessageDelta = {
            "type": "message_delta",
            "delta": {
                "stop_reason": stop_reason(self._plan, answer),
                "stop_sequence": matched_user_stop(self._plan, outcome),
            },
            "usage": {
                "input_tokens": outcome.prompt_tokens,
                "output_tokens": outcome.completion_tokens,
            },
        }
        return [*events, sse_typed(delta), sse_typed(_MESSAGE_STOP)]

    def _start_block(self, block: ContentBlock) -> list[ServerSentEvent]:
        self._answered = self._answered or block["type"] != "thinking"
        start: ContentBlockStart = {
            "type": "content_block_start",
            "index": self._blocks,
            "content_block": block,
        }
        self._blocks += 1
        return [sse_typed(start)]

    def _delta(
        self, delta: TextDeltaBody | InputJSONDelta | ThinkingDelta | SignatureDelta
    ) -> ServerSentEvent:
        event: ContentBlockDelta = {
            "type": "content_block_delta",
            "index": self._blocks - 1,
            "delta": delta,
        }
        return sse_typed(event)

    def _stop_block(self) -> ServerSentEvent:
        stop: ContentBlockStop = {"type": "content_block_stop", "index": self._blocks - 1}
        return sse_typed(stop)

    def _close_text(self) -> list[ServerSentEvent]:
        if not self._text_open:
            return []
        self._text_open = False
        return [self._stop_block()]

    def _close_thinking(self) -> list[ServerSentEvent]:
        """The thinking block's end: its (empty) signature first, as the SDK expects."""
        if not self._thinking_open:
            return []
        self._thinking_open = False
        return [self._delta({"type": "signature_delta", "signature": ""}), self._stop_block()]


def _thinking_block(thinking: str) -> ThinkingBlock:
    return {"type": "thinking", "thinking": thinking, "signature": ""}
