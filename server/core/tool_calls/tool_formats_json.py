"""Reading tool calls written as JSON while they stream, and Hermes/Qwen's `<tool_call>` tags.

`JsonCall` reads one call as it arrives, for every format whose calls are JSON (Hermes here,
Llama 3.x in tool_formats_llama3.py, Mistral in tool_formats_mistral.py, gpt-oss's arguments):
nothing is announced until its arguments begin (the name is known by then), so text that only
looked like a call is handed back whole as text; the arguments then stream character by
character until their closing brace.
"""

from __future__ import annotations

import enum
import json

from server.core.tool_calls.tool_stream import JsonSpan, StreamParser

_ARGUMENT_KEYS = ("arguments", "parameters")  # Llama 3.x says "parameters"
_OTHER_KEYS = ("type", "id")  # string-valued keys a call object may hold before its arguments
WHITESPACE = " \t\r\n"


class NotACall(Exception):
    """The text can no longer become a call in the expected format."""


def _read_string(text: str, at: int) -> tuple[str, int] | None:
    """The JSON string starting at `at` and the index after it; None if it is not closed yet."""
    escaped = False
    for end in range(at + 1, len(text)):
        char = text[end]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            try:
                return json.loads(text[at : end + 1]), end + 1
            except json.JSONDecodeError:
                raise NotACall from None
    return None


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in WHITESPACE:
        at += 1
    return at


def read_header(text: str) -> tuple[str, int] | None:
    """A call object's keys before its arguments, `text` starting after its `{`: the function's
    name and the index after the arguments key's colon; None while more text could still make
    it one. Raises NotACall (an unknown key, the arguments before the name, a non-string value)."""
    at, name = 0, None
    while True:
        at = _skip_space(text, at)
        if at == len(text):
            return None
        if text[at] != '"':
            raise NotACall
        key = _read_string(text, at)
        if key is None:
            return None
        at = _skip_space(text, key[1])
        if at == len(text):
            return None
        if text[at] != ":":
            raise NotACall
        at += 1
        if key[0] in _ARGUMENT_KEYS:
            if name is None:
                raise NotACall  # the name must come first for the call to be announced live
            return name, at
        if key[0] != "name" and key[0] not in _OTHER_KEYS:
            raise NotACall
        at = _skip_space(text, at)
        if at == len(text):
            return None
        if text[at] != '"':
            raise NotACall
        value = _read_string(text, at)
        if value is None:
            return None
        if key[0] == "name":
            name = value[0]
        at = _skip_space(text, value[1])
        if at == len(text):
            return None
        if text[at] != ",":
            raise NotACall
        at += 1


class Phase(enum.Enum):
    OPEN = "open"  # before the object's `{`
    HEADER = "header"  # the keys before the arguments
    VALUE = "value"  # before the arguments' first character
    ARGUMENTS = "arguments"  # streaming the arguments
    TAIL = "tail"  # the object's remaining keys, to its closing brace
    DONE = "done"
    FAILED = "failed"  # not a call: `raw` goes back to the text


class JsonCall:
    """One call in JSON, read as it arrives, its events sent through `owner`.

    Without `name`: an object from its `{`, naming the function in "name" and holding the
    arguments in "arguments" (or "parameters"), string-valued "type"/"id" allowed before them and
    anything after. With `name` (written outside the JSON: Mistral's `name[ARGS]`, harmony's
    `to=functions.NAME`): the arguments object alone. Arguments sent as a JSON string holding
    JSON (some models do) are decoded and sent as one fragment.
    """

    def __init__(self, owner: StreamParser, name: str | None = None) -> None:
        self._owner = owner
        self._name = name
        self._wrapped = name is None
        self.phase = Phase.OPEN if name is None else Phase.VALUE
        self.raw = ""  # text taken before the call was announced
        self._header = ""
        self._span = JsonSpan()
        self._tail = JsonSpan(depth=1)
        self._string_value = False
        self._arguments: list[str] = []

    @property
    def announced(self) -> bool:
        return self.phase in (Phase.ARGUMENTS, Phase.TAIL, Phase.DONE)

    @property
    def arguments_so_far(self) -> str:
        """The arguments' JSON text read so far (whole once the phase is past ARGUMENTS)."""
        return "".join(self._arguments)

    def take(self, text: str) -> int:
        """Consume the call's characters from the start of `text`; return how many."""
        used = 0
        while used < len(text) and self.phase not in (Phase.DONE, Phase.FAILED):
            used += self._take_some(text[used:])
        return used

    def cut_off(self) -> str | None:
        """The reply ended: the text to hand back if the call was never announced, else None
        (and the call is finished if its arguments are whole)."""
        if not self.announced:
            self.phase = Phase.FAILED
            return self.raw
        if self.phase is Phase.TAIL:
            self._finish()
        return None

    def _take_some(self, text: str) -> int:
        match self.phase:
            case Phase.OPEN | Phase.VALUE:
                return self._opening(text)
            case Phase.HEADER:
                return self._read_header(text)
            case Phase.ARGUMENTS:
                return self._read_arguments(text)
            case _:
                used = self._tail.scan(text)
                if self._tail.done:
                    self._finish()
                return used

    def _opening(self, text: str) -> int:
        """Whitespace, then the object's `{` (OPEN) or the arguments' first character (VALUE)."""
        char = text[0]
        if char in WHITESPACE:
            self.raw += char
            return 1
        if self.phase is Phase.OPEN:
            if char != "{":
                self.phase = Phase.FAILED
                return 0
            self.raw += char
            self.phase = Phase.HEADER
            return 1
        if char not in '{"':
            self.phase = Phase.FAILED
            return 0
        assert self._name is not None
        self._owner._start_call(self._name)
        self._string_value = char == '"'
        self.phase = Phase.ARGUMENTS
        return 0

    def _read_header(self, text: str) -> int:
        before = len(self._header)
        self._header += text
        try:
            header = read_header(self._header)
        except NotACall:
            self.raw += text
            self.phase = Phase.FAILED
            return len(text)
        if header is None:
            self.raw += text
            return len(text)
        self._name, end = header
        used = end - before
        self.raw += text[:used]
        self.phase = Phase.VALUE
        return used

    def _read_arguments(self, text: str) -> int:
        used = self._span.scan(text)
        fragment = text[:used]
        self._arguments.append(fragment)
        if not self._string_value:
            self._owner._arguments(fragment)
        if self._span.done:
            if self._string_value:
                self._arguments = [_decoded_arguments("".join(self._arguments))]
                self._owner._arguments(self._arguments[0])
            if self._wrapped:
                self.phase = Phase.TAIL
            else:
                self._finish()
        return used

    def _finish(self) -> None:
        self.phase = Phase.DONE
        self._owner._end_call("".join(self._arguments))


def _decoded_arguments(literal: str) -> str:
    """Arguments given as a JSON string: the JSON it holds (an object), else `{"value": …}`."""
    try:
        text = json.loads(literal)
    except json.JSONDecodeError:
        return "{}"  # a malformed string: nothing to keep
    try:
        if isinstance(json.loads(text), dict):
            return str(text)
    except json.JSONDecodeError:
        pass
    return json.dumps({"value": text})


_HERMES_OPEN = "<tool_call>"
_HERMES_CLOSE = "</tool_call>"


class HermesParser(StreamParser):
    """`<tool_call>{"name": …, "arguments": {…}}</tool_call>`, as many as the model writes
    (Hermes 2/3, Qwen 2.5/3, Granite 4, …). Text inside the tags that is not a call is text."""

    def __init__(self) -> None:
        super().__init__()
        self._call: JsonCall | None = None
        self._closing = False  # after a call's object, before its closing tag

    def _step(self) -> bool:
        if self._call is not None:
            return self._in_call(self._call)
        if self._closing:
            return self._close()
        before = len(self._pending)
        if self._text_until((_HERMES_OPEN,)) is not None:
            self._call = JsonCall(self)
            return True
        return len(self._pending) != before

    def _in_call(self, call: JsonCall) -> bool:
        used = call.take(self._pending)
        self._pending = self._pending[used:]
        if call.phase is Phase.FAILED:
            self._text(_HERMES_OPEN)
            self._pending = call.raw + self._pending
            self._call = None
            return True
        if call.phase is Phase.DONE:
            self._call, self._closing = None, True
            return True
        return used > 0

    def _close(self) -> bool:
        rest = self._pending.lstrip(WHITESPACE)
        if rest.startswith(_HERMES_CLOSE):
            self._pending, self._closing = rest[len(_HERMES_CLOSE) :], False
            return True
        if _HERMES_CLOSE.startswith(rest):
            return False  # whitespace, or the closing tag begun: wait
        self._closing = False  # no closing tag: what follows is text
        return True

    def _end(self) -> None:
        if self._call is not None:
            leftover = self._call.cut_off()
            if leftover is not None:
                self._text(_HERMES_OPEN + leftover + self._pending)
        elif not self._closing or not _HERMES_CLOSE.startswith(self._pending.strip()):
            self._text(self._pending)
