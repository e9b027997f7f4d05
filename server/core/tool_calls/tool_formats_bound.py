"""A grammar-bound tool call read while it streams, and a call cut off before its end.

A model without a tool-call format of its own is told to call a tool with one JSON object,
`{"name": …, "arguments": {…}}` (server/core/templates/chat.py), and a grammar binds the reply to
it. The call is announced as soon as its name is whole and its arguments stream as the model writes
them, as the live formats' calls do (tool_formats_json.JsonCall reads it).

A call cut off before its end (max_tokens, or a loop cut: GenerationRequest.cut_loops) stays a
call, its arguments closed where they stop, as OpenAI answers a cut call (the call so far, with
finish_reason "length") and llama-server streams one (its partial JSON healed); it never turns
into text, which a client would show as the answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from server.core.templates.chat import ChatTemplateError, ToolSpec
from server.core.tool_calls.tool_formats_json import JsonCall, Phase
from server.core.tool_calls.tool_stream import StreamParser

_CLOSERS = {"{": "}", "[": "]"}
# How far back `closed_json` looks for a place to close a value cut off in a bad spot.
_CUT_POINTS_TRIED = 64


class BoundCallParser(StreamParser):
    """One grammar-bound call (`{"name": …, "arguments": {…}}`). A reply that is not one (the
    grammar was off) passes through as text."""

    def __init__(self) -> None:
        super().__init__()
        self._call = JsonCall(self)

    def _step(self) -> bool:
        if self._call.phase is Phase.FAILED:
            self._text(self._pending)
            self._pending = ""
            return False
        if self._call.phase is Phase.DONE:  # the grammar ends with the object: whitespace is its
            self._text(self._pending if self._pending.strip() else "")
            self._pending = ""
            return False
        return self._read_call()

    def _read_call(self) -> bool:
        used = self._call.take(self._pending)
        self._pending = self._pending[used:]
        if self._call.phase is Phase.FAILED:  # not a call after all: all of it is text
            self._text(self._call.raw)
            return bool(self._pending)
        return used > 0

    def _end(self) -> None:
        call = self._call
        if call.phase is Phase.ARGUMENTS:  # cut off inside its arguments: closed where they stop
            so_far = call.arguments_so_far
            closed = closed_json(so_far)
            if closed.startswith(so_far):  # the fragments sent, joined, then parse
                self._arguments(closed[len(so_far) :])
            self._end_call(closed)
        elif call.phase in (Phase.OPEN, Phase.HEADER, Phase.VALUE):
            name = _whole_name(call.raw)
            if name is None:  # cut before its name was whole: nothing of a call to send
                self._text(call.raw + self._pending)
                return
            self._start_call(name)  # cut before its arguments: the call, with none
            self._arguments("{}")
            self._end_call("{}")
        elif call.phase is Phase.TAIL:
            call.cut_off()  # its arguments are whole: the call is finished


_NAME = re.compile(r'"name"\s*:\s*("(?:[^"\\]|\\.)*")')


def _whole_name(header: str) -> str | None:
    """The function's name in a call's first keys, once its string is closed."""
    found = _NAME.search(header)
    if found is None:
        return None
    try:
        name = json.loads(found.group(1))
    except json.JSONDecodeError:
        return None
    return name if isinstance(name, str) and name else None


def closed_json(text: str) -> str:
    """`text`, the start of a JSON object or array, closed where it stops: an open string
    ended, open brackets closed; where that is no JSON (a key without its value, half a
    number), closed at an earlier place instead. "{}" when nothing of it stands."""
    opens, cut_points, in_string, escaped = "", [(0, "")], False, False
    for at, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                cut_points.append((at + 1, opens))
        elif char == '"':
            in_string = True
        elif char in _CLOSERS:
            opens += char
            cut_points.append((at + 1, opens))
        elif char in "}]":
            opens = opens[:-1]
            cut_points.append((at + 1, opens))
        elif char == ",":
            cut_points.append((at, opens))  # before the comma: the value before it is whole
    tail = _ended_string(text) if in_string else text
    candidates = [(tail, opens), *((text[:at], left) for at, left in reversed(cut_points))]
    for prefix, left in candidates[:_CUT_POINTS_TRIED]:
        attempt = prefix.rstrip() + "".join(_CLOSERS[bracket] for bracket in reversed(left))
        try:
            json.loads(attempt)
        except json.JSONDecodeError:
            continue
        return attempt
    return "{}"


def _ended_string(text: str) -> str:
    """`text`, cut inside a string, with the string ended (a half-written escape dropped)."""
    unicode_escape = text.rfind("\\u")
    if unicode_escape != -1 and len(text) - unicode_escape < 6:
        text = text[:unicode_escape]
    trailing = len(text) - len(text.rstrip("\\"))
    if trailing % 2:
        text = text[:-1]
    return text + '"'


def tool_call_schema(tools: Sequence[ToolSpec], only: str | None = None) -> dict[str, Any]:
    """JSON schema admitting exactly one call of one of `tools` (or of the tool `only`)."""
    chosen = [t for t in tools if only is None or t.name == only]
    if not chosen:
        raise ChatTemplateError(f"tool_choice names {only!r}, which is not among the tools")
    return {
        "oneOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": _object_schema(t)},
                "required": ["name", "arguments"],
            }
            for t in chosen
        ]
    }


def _object_schema(tool: ToolSpec) -> dict[str, Any]:
    schema = dict(tool.parameters) if tool.parameters else {"type": "object"}
    schema.setdefault("type", "object")
    return schema
