"""Chat output as dialect-neutral stream events, and what the live tool-call parsers share.

Every chat dialect formats the same events: `TextDelta`, then for each tool call
`ToolCallStart` → `ToolArgumentsDelta`… → `ToolCallDone`, produced while the model writes,
so argument fragments reach the client as generated: in a model's own format (Hermes, Llama
3.x, Mistral, Qwen3-Coder, gpt-oss: `tool_formats.py`) or as a grammar-bound JSON call
(`tool_formats_bound.py`); the parsers (`tool_formats_*.py`) are all built on `StreamParser`
here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from server.core.templates.chat import ToolCall
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


class ToolCallStream(Protocol):
    """A live parser of one reply in a model's own tool-call format (`tool_formats_live.py`
    makes one per format): plain text passes through, each call comes out as ToolCallStart →
    ToolArgumentsDelta… → ToolCallDone while the model writes it, several calls indexed 0, 1, …
    `text_parts` and `calls` hold the whole reply once `finish` has been called."""

    text_parts: list[str]
    calls: list[ToolCall]

    def feed(self, text: str) -> list[ChatStreamEvent]: ...

    def finish(self) -> list[ChatStreamEvent]: ...


class StreamParser:
    """What every format's parser shares: the text not yet classified (`_pending`), the events
    of the current `feed`, and the bookkeeping of calls (indexes, ids, the finished calls).

    A subclass says how to move on from the pending text (`_step`, False while it needs more)
    and what to do with what is left when the reply ends (`_end`).
    """

    def __init__(self) -> None:
        self._pending = ""
        self._events: list[ChatStreamEvent] = []
        self._index = -1
        self._call_id = ""
        self._name = ""
        self._after_call = False
        self.calls: list[ToolCall] = []
        self.text_parts: list[str] = []

    def feed(self, text: str) -> list[ChatStreamEvent]:
        self._pending += text
        while self._pending and self._step():
            pass
        return self._flush()

    def finish(self) -> list[ChatStreamEvent]:
        """End of generation: text held back in case it began a tag is text after all; a call
        whose arguments are whole is finished, one cut off inside them is dropped."""
        self._end()
        self._pending = ""
        return self._flush()

    def _step(self) -> bool:
        raise NotImplementedError

    def _end(self) -> None:
        raise NotImplementedError

    def _flush(self) -> list[ChatStreamEvent]:
        events, self._events = self._events, []
        return events

    def _text(self, text: str) -> None:
        if text:
            self.text_parts.append(text)
            self._events.append(TextDelta(text))

    def _text_until(self, tags: Sequence[str]) -> str | None:
        """Pass pending text on up to the first of `tags`, consume that tag and return it; with
        none there, pass on all but what may still begin one, and return None. Whitespace
        right after a call is its formatting, not text: it goes."""
        if self._after_call:
            self._pending = self._pending.lstrip()
            self._after_call = not self._pending
        found = [(at, -len(tag), tag) for tag in tags if (at := self._pending.find(tag)) != -1]
        if found:
            at, _, tag = min(found)
            self._text(self._pending[:at])
            self._pending = self._pending[at + len(tag) :]
            return tag
        hold = max(partial_suffix(self._pending, tag) for tag in tags)
        self._text(self._pending[: len(self._pending) - hold])
        self._pending = self._pending[len(self._pending) - hold :]
        return None

    def _start_call(self, name: str) -> None:
        self._index += 1
        self._call_id = new_call_id()
        self._name = name
        self._events.append(ToolCallStart(self._index, self._call_id, name))

    def _arguments(self, fragment: str) -> None:
        if fragment:
            self._events.append(ToolArgumentsDelta(self._index, fragment))

    def _end_call(self, arguments_json: str) -> None:
        """The current call is whole: its arguments (JSON text; not an object: `{"value": …}`,
        not JSON at all: `{}`, as the fragments already sent cannot be taken back)."""
        try:
            arguments = json.loads(arguments_json)
        except json.JSONDecodeError:
            arguments = {}
        if not isinstance(arguments, dict):
            arguments = {"value": arguments}
        call = ToolCall(self._call_id, self._name, arguments)
        self.calls.append(call)
        self._events.append(ToolCallDone(self._index, call))
        self._after_call = True


class JsonSpan:
    """Where a JSON value ends, in text arriving in pieces: string-aware bracket counting.
    `depth` 1 starts inside an object (its remaining keys are skipped to its closing brace)."""

    def __init__(self, depth: int = 0) -> None:
        self._depth = depth
        self._in_string = False
        self._escaped = False
        self.done = False

    def scan(self, text: str) -> int:
        """How many characters of `text` belong to the value: all of them, unless it ends."""
        for at, char in enumerate(text):
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
                    if self._depth == 0:  # a string value on its own
                        self.done = True
                        return at + 1
            elif char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                if self._depth <= 0:
                    self.done = True
                    return at + 1
        return len(text)


def partial_suffix(text: str, tag: str) -> int:
    """The length of the longest end of `text` that begins `tag` (held back: it may be one)."""
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-length:]):
            return length
    return 0
