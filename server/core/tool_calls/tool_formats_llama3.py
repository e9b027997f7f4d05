"""Live parser for Llama 3.1-3.3's tool calls: the reply is a JSON object (or several), as its
template asks: `{"name": function name, "parameters": dictionary of argument name and its value}`.
"""

from __future__ import annotations

import enum

from server.core.tool_calls.tool_formats_json import WHITESPACE, JsonCall, Phase
from server.core.tool_calls.tool_stream import StreamParser

_PYTHON_TAG = "<|python_tag|>"
_SEPARATORS = WHITESPACE + ";"


class Llama3Mode(enum.Enum):
    START = "start"  # the reply's beginning: a call, or text
    BETWEEN = "between"  # after a call: `;` or whitespace, then another call or text
    TEXT = "text"  # plain text (a call only after <|python_tag|>)


class Llama3Parser(StreamParser):
    """Llama 3.1-3.3: a reply that is `{"name": …, "parameters": {…}}` ("arguments" too),
    optionally after `<|python_tag|>`, several separated by `;` or newlines. As in llama.cpp,
    a call is recognized at the reply's start or after `<|python_tag|>`; JSON met later in the
    text is text. Built-in tools' Python-style calls (`brave_search.call(…)`) stay text."""

    def __init__(self) -> None:
        super().__init__()
        self._mode = Llama3Mode.START
        self._call: JsonCall | None = None
        self._prefix = ""  # what came before the call's object (a python tag)

    def _step(self) -> bool:
        if self._call is not None:
            return self._in_call(self._call)
        if self._mode is Llama3Mode.TEXT:
            before = len(self._pending)
            if self._text_until((_PYTHON_TAG,)) is not None:
                self._begin(_PYTHON_TAG)
                return True
            return len(self._pending) != before
        return self._call_or_text()

    def _call_or_text(self) -> bool:
        """At the start or between calls: another call, or the rest is text."""
        skip = WHITESPACE if self._mode is Llama3Mode.START else _SEPARATORS
        rest = self._pending.lstrip(skip)
        lead = self._pending[: len(self._pending) - len(rest)]
        if rest.startswith(_PYTHON_TAG):
            self._pending = rest[len(_PYTHON_TAG) :]
            self._begin(lead + _PYTHON_TAG if self._mode is Llama3Mode.START else _PYTHON_TAG)
            return True
        if not rest or _PYTHON_TAG.startswith(rest):
            return False  # wait for what follows
        if rest[0] == "{":
            self._pending = rest
            self._begin(lead if self._mode is Llama3Mode.START else "")
            return True
        if self._mode is Llama3Mode.BETWEEN:
            self._pending = rest  # the separators after the last call are not text
        self._mode = Llama3Mode.TEXT
        return True

    def _begin(self, prefix: str) -> None:
        self._call, self._prefix = JsonCall(self), prefix

    def _in_call(self, call: JsonCall) -> bool:
        used = call.take(self._pending)
        self._pending = self._pending[used:]
        if call.phase is Phase.FAILED:
            self._text(self._prefix)
            self._pending = call.raw + self._pending
            self._call, self._mode = None, Llama3Mode.TEXT
            return True
        if call.phase is Phase.DONE:
            self._call, self._mode = None, Llama3Mode.BETWEEN
            return True
        return used > 0

    def _end(self) -> None:
        if self._call is not None:
            leftover = self._call.cut_off()
            if leftover is not None:
                self._text(self._prefix + leftover + self._pending)
        elif self._mode is not Llama3Mode.BETWEEN or self._pending.strip(_SEPARATORS):
            self._text(self._pending)
