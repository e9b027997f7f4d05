"""Chat output as dialect-neutral stream events, and a live parser for tagged tool calls.

Every chat dialect formats the same events: `TextDelta`, then for each tool call
`ToolCallStart` → `ToolArgumentsDelta`… → `ToolCallDone`. A constrained (grammar) tool call
produces them all at once at the end; with `--jinjatools` and a model whose template uses
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Hermes, Qwen), `ToolCallParser`
produces them while the model writes, so argument fragments reach the client as generated.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from server.core.chat import ToolCall
from server.core.types import TokenLogprob


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of reply text; plain text also carries its tokens and their log-probabilities
    (when asked), text parsed out of tool-call tags does not."""

    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    index: int
    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolArgumentsDelta:
    index: int
    fragment: str  # a piece of the arguments' JSON text


@dataclass(frozen=True, slots=True)
class ToolCallDone:
    index: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's thought (`<think>…</think>`, harmony's analysis channel), split
    from the answer: each dialect sends it its own way (reasoning_content, a thinking block)."""

    text: str


ChatStreamEvent = TextDelta | ReasoningDelta | ToolCallStart | ToolArgumentsDelta | ToolCallDone


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def whole_call_events(index: int, call: ToolCall) -> list[ChatStreamEvent]:
    """A finished call as the event sequence a live call would have produced."""
    return [
        ToolCallStart(index, call.id, call.name),
        ToolArgumentsDelta(index, json.dumps(call.arguments)),
        ToolCallDone(index, call),
    ]


_NAME_KEY = '"name"'
_ARGUMENTS_KEY = '"arguments"'


class ToolCallParser:
    """Splits streamed text into plain text and tagged tool calls, as it arrives.

    Text that may be the start of the opening tag is held back; inside a call, the name is
    read once `"arguments":` has been seen, and the arguments object is streamed character
    by character (string-aware brace counting tells where it ends).
    """

    def __init__(self, open_tag: str, close_tag: str) -> None:
        self._open = open_tag
        self._close = close_tag
        self._pending = ""  # text not yet classified
        self._in_call = False
        self._header = ""  # call text before the arguments object
        self._arguments = ""  # the arguments JSON streamed so far
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._arguments_done = False
        self._index = -1
        self._call_id = ""
        self._name = ""
        self.calls: list[ToolCall] = []
        self.text_parts: list[str] = []

    def feed(self, text: str) -> list[ChatStreamEvent]:
        self._pending += text
        events: list[ChatStreamEvent] = []
        while self._pending:
            before = self._pending
            if self._in_call:
                self._consume_call(events)
            else:
                self._consume_text(events)
            if self._pending == before:
                break  # waiting for more text
        return events

    def finish(self) -> list[ChatStreamEvent]:
        """End of generation: a half-open tag is just text; a cut-off call is dropped."""
        events: list[ChatStreamEvent] = []
        if not self._in_call and self._pending:
            events.append(self._text(self._pending))
        self._pending = ""
        return events

    def _text(self, text: str) -> TextDelta:
        self.text_parts.append(text)
        return TextDelta(text)

    def _consume_text(self, events: list[ChatStreamEvent]) -> None:
        start = self._pending.find(self._open)
        if start != -1:
            if start:
                events.append(self._text(self._pending[:start]))
            self._pending = self._pending[start + len(self._open) :]
            self._begin_call()
            return
        hold = _partial_suffix(self._pending, self._open)
        ready = self._pending[: len(self._pending) - hold]
        if ready:
            events.append(self._text(ready))
            self._pending = self._pending[len(ready) :]

    def _begin_call(self) -> None:
        self._in_call = True
        self._header = ""
        self._arguments = ""
        self._depth = 0
        self._in_string = self._escaped = self._arguments_done = False
        self._name = ""

    def _consume_call(self, events: list[ChatStreamEvent]) -> None:
        if not self._name:
            self._header += self._pending
            self._pending = ""
            key = self._header.find(_ARGUMENTS_KEY)
            colon = self._header.find(":", key + len(_ARGUMENTS_KEY)) if key != -1 else -1
            if colon == -1:
                return
            name = _read_name(self._header[:key])
            if name is None:
                return
            self._name = name
            self._index += 1
            self._call_id = new_call_id()
            events.append(ToolCallStart(self._index, self._call_id, name))
            self._pending = self._header[colon + 1 :]
        if not self._arguments_done:
            fragment = self._scan_arguments()
            if fragment:
                events.append(ToolArgumentsDelta(self._index, fragment))
        if self._arguments_done:
            end = self._pending.find(self._close)
            if end == -1:
                return
            self._pending = self._pending[end + len(self._close) :]
            self._in_call = False
            try:
                arguments = json.loads(self._arguments)
            except json.JSONDecodeError:
                arguments = {}
            call = ToolCall(
                self._call_id,
                self._name,
                arguments if isinstance(arguments, dict) else {"value": arguments},
            )
            self.calls.append(call)
            events.append(ToolCallDone(self._index, call))

    def _scan_arguments(self) -> str:
        """Move the arguments object's characters from pending text into `_arguments`."""
        taken: list[str] = []
        consumed = 0
        for char in self._pending:
            consumed += 1
            if self._depth == 0 and not taken and char.isspace():
                continue  # whitespace before the object
            taken.append(char)
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self._arguments_done = True
                    break
        self._pending = self._pending[consumed:]
        fragment = "".join(taken)
        self._arguments += fragment
        return fragment


def _read_name(header: str) -> str | None:
    key = header.find(_NAME_KEY)
    if key == -1:
        return None
    rest = header[key + len(_NAME_KEY) :].lstrip().removeprefix(":").lstrip()
    if not rest.startswith('"'):
        return None
    end = rest.find('"', 1)
    return rest[1:end] if end != -1 else None


def _partial_suffix(text: str, tag: str) -> int:
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-length:]):
            return length
    return 0
