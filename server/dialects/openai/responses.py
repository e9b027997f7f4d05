"""Answers and stream events in the shapes of OpenAI's Responses API (/v1/responses).

Its stream names every event and ends with `response.completed` even when cut off, with
`incomplete_details` saying so, since the SDK's `get_final_response()` accepts nothing else;
a failure is its own `error` event, then `response.failed`. A thinking model's thought is a
`reasoning` item before the message (`response.reasoning_text.delta` events while it streams).
llama-server's telemetry as it sends it here: with `return_progress`, `response.in_progress`
events with `prompt_progress` while the prompt is read; with `timings_per_token`, `timings` on
each text delta; always `timings` beside `response` in `response.completed`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sse_starlette import ServerSentEvent

from server.core.tool_calls.tool_stream import (
    ChatStreamEvent,
    ReasoningDelta,
    TextDelta,
    ToolArgumentsDelta,
    ToolCallDone,
    ToolCallStart,
)
from server.core.types import FinishReason, GenerationOutcome, Progress
from server.dialects.chat.answers import ChatAnswer
from server.dialects.edge.errors import Dialect
from server.dialects.openai.requests import ResponsesRequest
from server.dialects.openai.schemas import (
    ArgumentsDeltaEvent,
    ArgumentsDoneEvent,
    ContentPartEvent,
    ErrorEvent,
    FunctionCallItem,
    ItemEvent,
    MessageItem,
    OutputItem,
    OutputText,
    ReasoningDeltaEvent,
    ReasoningDoneEvent,
    ReasoningItem,
    ReasoningText,
    ResponseLifecycleEvent,
    ResponseObject,
    ResponseUsage,
    TextDeltaEvent,
    TextDoneEvent,
)
from server.dialects.routes.llama_extensions import ReplyClock, prompt_progress, timings
from server.dialects.streams.wire import SSEFormat, sse_typed


def _call_item_id(call_id: str) -> str:
    """The Responses item id of a function call (`fc_…`), from its call id (`call_…`)."""
    return "fc_" + call_id.removeprefix("call_")


class ResponsesWire(SSEFormat):
    """The Response object of one request and its stream's events, numbered in order.

    The stream's output items are an assistant message (opened by the first text, closed by a
    tool call or the end) and function calls, in the order they began.
    """

    dialect = Dialect.OPENAI

    def __init__(
        self, response_id: str, model: str, body: ResponsesRequest, timings_per_token: bool = False
    ) -> None:
        self._id = response_id
        self._clock = ReplyClock() if timings_per_token else None
        self._message_id = "msg_" + response_id.removeprefix("resp_")
        self._model = model
        self._body = body
        self._created = int(time.time())
        self._sequence = 0
        self._output: list[OutputItem | None] = []  # None: a place still being streamed
        self._message_index: int | None = None  # the open message's output_index
        self._message_parts: list[str] = []
        self._calls: dict[int, tuple[int, ToolCallStart]] = {}  # tool index → (place, start)
        self._thought_index: int | None = None  # the open reasoning item's output_index
        self._thought_parts: list[str] = []

    def whole(self, answer: ChatAnswer) -> ResponseObject:
        items: list[OutputItem] = []
        if answer.reasoning:
            items.append(self._reasoning_item(0, answer.reasoning))
        if answer.text or not answer.tool_calls:
            items.append(self._message_item(answer.text))
        items += [self._call_item(c.id, c.name, json.dumps(c.arguments)) for c in answer.tool_calls]
        return self._response("completed", items, answer.outcome, answer.reasoning_tokens)

    # -- the objects -----------------------------------------------------------------------

    def _next_number(self) -> int:
        self._sequence += 1
        return self._sequence - 1

    def _response(
        self,
        status: str,
        output: list[OutputItem],
        outcome: GenerationOutcome | None = None,
        reasoning_tokens: int = 0,
        error: str | None = None,
    ) -> ResponseObject:
        cut_off = outcome is not None and outcome.finish_reason is FinishReason.LENGTH
        body = self._body
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created,
            "status": "incomplete" if cut_off and status == "completed" else status,
            "model": self._model,
            "output": output,
            "output_text": "".join(
                part["text"]
                for item in output
                if item["type"] == "message"
                for part in item["content"]
            ),
            "error": None if error is None else {"code": "server_error", "message": error},
            "incomplete_details": {"reason": "max_output_tokens"} if cut_off else None,
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "parallel_tool_calls": False,
            "temperature": body.temperature,
            "top_p": body.top_p,
            "tool_choice": body.tool_choice or "auto",
            "tools": [t.model_dump() for t in body.tools or ()],
            "text": body.text or {"format": {"type": "text"}},
            "metadata": {},
            "usage": None if outcome is None else _response_usage(outcome, reasoning_tokens),
        }

    def _message_item(self, text: str, status: str = "completed") -> MessageItem:
        content: list[OutputText] = []
        if status != "in_progress":
            content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
        return {
            "type": "message",
            "id": self._message_id,
            "role": "assistant",
            "status": status,
            "content": content,
        }

    def _reasoning_item(self, index: int, text: str, status: str = "completed") -> ReasoningItem:
        content: list[ReasoningText] = []
        if status != "in_progress":
            content.append({"type": "reasoning_text", "text": text})
        return {
            "type": "reasoning",
            "id": f"rs_{self._id.removeprefix('resp_')}_{index}",
            "summary": [],
            "content": content,
            "status": status,
        }

    def _call_item(
        self, call_id: str, name: str, arguments: str, status: str = "completed"
    ) -> FunctionCallItem:
        return {
            "type": "function_call",
            "id": _call_item_id(call_id),
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": status,
        }

    def _lifecycle(self, kind: str, response: ResponseObject, **extra: Any) -> ServerSentEvent:
        """A lifecycle event; `extra`: llama-server's telemetry beside the response."""
        event: ResponseLifecycleEvent = {
            "type": kind,
            "sequence_number": self._next_number(),
            "response": response,
        }
        return sse_typed({**event, **extra})

    def _item_event(self, kind: str, output_index: int, item: OutputItem) -> ServerSentEvent:
        event: ItemEvent = {
            "type": kind,
            "sequence_number": self._next_number(),
            "output_index": output_index,
            "item": item,
        }
        return sse_typed(event)

    # -- the stream ------------------------------------------------------------------------

    def opening(self) -> list[ServerSentEvent]:
        started = self._response("in_progress", [])
        return [
            self._lifecycle("response.created", started),
            self._lifecycle("response.in_progress", started),
        ]

    def event(self, item: ChatStreamEvent) -> list[ServerSentEvent]:
        match item:
            case ReasoningDelta(text=text):
                opened = self._open_thought() if self._thought_index is None else []
                return [*self._close_message(), *opened, self._thought_delta(text)]
            case TextDelta(text=text, token_ids=ids):
                closed = self._close_thought()
                opened = self._open_message() if self._message_index is None else []
                assert self._message_index is not None
                return [*closed, *opened, self._text_delta(self._message_index, text, len(ids))]
            case ToolCallStart():
                closed = [*self._close_thought(), *self._close_message()]
                return [*closed, self._start_call(item)]
            case ToolArgumentsDelta(index=index, fragment=fragment):
                return [self._arguments_delta(index, fragment)]
            case ToolCallDone(index=index, call=call):
                return self._finish_call(index, json.dumps(call.arguments))
        return []

    def finished(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        outcome = answer.outcome
        thought = self._close_thought()
        # An empty reply (or one that only thought) still has its (empty) message.
        empty = all(item is None or item["type"] == "reasoning" for item in self._output)
        opened = self._open_message() if empty and self._message_index is None else []
        closed = self._close_message()
        output = [item for item in self._output if item is not None]
        response = self._response("completed", output, outcome, answer.reasoning_tokens)
        completed = self._lifecycle("response.completed", response, timings=timings(outcome))
        return [*thought, *opened, *closed, completed]

    def progress(self, progress: Progress) -> list[ServerSentEvent]:
        """llama-server's `return_progress`: how far the prompt is read, in_progress."""
        if self._clock is not None:
            self._clock.read(progress)
        started = self._response("in_progress", [])
        reading = prompt_progress(progress)
        return [self._lifecycle("response.in_progress", started, prompt_progress=reading)]

    def _open_thought(self) -> list[ServerSentEvent]:
        index = self._thought_index = len(self._output)
        self._output.append(None)
        self._thought_parts = []
        pending = self._reasoning_item(index, "", "in_progress")
        part: ReasoningText = {"type": "reasoning_text", "text": ""}
        added = self._item_event("response.output_item.added", index, pending)
        return [added, self._part_event("response.content_part.added", index, pending, part)]

    def _thought_delta(self, text: str) -> ServerSentEvent:
        assert self._thought_index is not None
        self._thought_parts.append(text)
        event: ReasoningDeltaEvent = {
            "type": "response.reasoning_text.delta",
            "sequence_number": self._next_number(),
            "item_id": self._reasoning_item(self._thought_index, "")["id"],
            "output_index": self._thought_index,
            "content_index": 0,
            "delta": text,
        }
        return sse_typed(event)

    def _close_thought(self) -> list[ServerSentEvent]:
        index = self._thought_index
        if index is None:
            return []
        self._thought_index = None
        text = "".join(self._thought_parts)
        item = self._output[index] = self._reasoning_item(index, text)
        done: ReasoningDoneEvent = {
            "type": "response.reasoning_text.done",
            "sequence_number": self._next_number(),
            "item_id": item["id"],
            "output_index": index,
            "content_index": 0,
            "text": text,
        }
        part = self._part_event("response.content_part.done", index, item, item["content"][0])
        return [sse_typed(done), part, self._item_event("response.output_item.done", index, item)]

    def _part_event(
        self, kind: str, index: int, item: ReasoningItem, part: ReasoningText
    ) -> ServerSentEvent:
        event: ContentPartEvent = {
            "type": kind,
            "sequence_number": self._next_number(),
            "item_id": item["id"],
            "output_index": index,
            "content_index": 0,
            "part": part,
        }
        return sse_typed(event)

    def _open_message(self) -> list[ServerSentEvent]:
        index = self._message_index = len(self._output)
        self._output.append(None)
        pending = self._message_item("", "in_progress")
        item = self._item_event("response.output_item.added", index, pending)
        return [item, self._content_part("response.content_part.added", index, "")]

    def _content_part(self, kind: str, index: int, text: str) -> ServerSentEvent:
        event: ContentPartEvent = {
            "type": kind,
            "sequence_number": self._next_number(),
            "item_id": self._message_id,
            "output_index": index,
            "content_index": 0,
            "part": {"type": "output_text", "text": text, "annotations": []},
        }
        return sse_typed(event)

    def _text_delta(self, index: int, text: str, tokens: int) -> ServerSentEvent:
        self._message_parts.append(text)
        event: TextDeltaEvent = {
            "type": "response.output_text.delta",
            "sequence_number": self._next_number(),
            "item_id": self._message_id,
            "output_index": index,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
        }
        if self._clock is None:
            return sse_typed(event)
        return sse_typed({**event, "timings": self._clock.after(tokens)})

    def _close_message(self) -> list[ServerSentEvent]:
        if self._message_index is None:
            return []
        index, text = self._message_index, "".join(self._message_parts)
        item = self._message_item(text)
        self._output[index] = item
        done: TextDoneEvent = {
            "type": "response.output_text.done",
            "sequence_number": self._next_number(),
            "item_id": self._message_id,
            "output_index": index,
            "content_index": 0,
            "text": text,
            "logprobs": [],
        }
        part = self._content_part("response.content_part.done", index, text)
        self._message_index = None
        return [sse_typed(done), part, self._item_event("response.output_item.done", index, item)]

    def _start_call(self, start: ToolCallStart) -> ServerSentEvent:
        self._calls[start.index] = (len(self._output), start)
        self._output.append(None)
        pending = self._call_item(start.call_id, start.name, "", "in_progress")
        return self._item_event("response.output_item.added", len(self._output) - 1, pending)

    def _arguments_delta(self, index: int, fragment: str) -> ServerSentEvent:
        output_index, start = self._calls[index]
        event: ArgumentsDeltaEvent = {
            "type": "response.function_call_arguments.delta",
            "sequence_number": self._next_number(),
            "item_id": _call_item_id(start.call_id),
            "output_index": output_index,
            "delta": fragment,
        }
        return sse_typed(event)

    def _finish_call(self, index: int, arguments: str) -> list[ServerSentEvent]:
        output_index, start = self._calls[index]
        item = self._call_item(start.call_id, start.name, arguments)
        self._output[output_index] = item
        done: ArgumentsDoneEvent = {
            "type": "response.function_call_arguments.done",
            "sequence_number": self._next_number(),
            "item_id": item["id"],
            "output_index": output_index,
            "name": start.name,
            "arguments": arguments,
        }
        return [sse_typed(done), self._item_event("response.output_item.done", output_index, item)]

    def failure(self, message: str, answer: ChatAnswer) -> list[ServerSentEvent]:
        """Responses' own error event, then `response.failed` (its stream's end)."""
        error: ErrorEvent = {
            "type": "error",
            "sequence_number": self._next_number(),
            "code": "server_error",
            "message": message,
            "param": None,
        }
        failed_response = self._response("failed", [], answer.outcome, error=message)
        return [sse_typed(error), self._lifecycle("response.failed", failed_response)]


def _response_usage(outcome: GenerationOutcome, reasoning_tokens: int) -> ResponseUsage:
    return {
        "input_tokens": outcome.prompt_tokens,
        "input_tokens_details": {"cached_tokens": outcome.reused_prompt_tokens},
        "output_tokens": outcome.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
    }
