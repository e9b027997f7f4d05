"""Live parser for Qwen3-Coder's XML tool calls (also Qwen3.5, Nemotron 3 Nano, StepFun):

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

The arguments go to clients as a JSON object built while the model writes: each parameter's
key as soon as it is read, a string value character by character. Values are text; as in
llama.cpp, a parameter whose schema (the tool's `parameters`) allows numbers, booleans, arrays,
objects or null is read as JSON when it parses as one of those, so `3` is 3 for an integer.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any

from server.core.templates.chat import ToolSpec
from server.core.tool_calls.tool_stream import StreamParser, partial_suffix

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_FUNCTION = "<function="
_FUNCTION_END = "</function>"
_PARAMETER = "<parameter="
_PARAMETER_END = "</parameter>"
_WHITESPACE = " \t\r\n"
_LONGEST_NAME = 256


class Mode(enum.Enum):
    TEXT = "text"
    OPENED = "opened"  # after <tool_call>: <function= comes next
    FUNCTION = "function"  # reading NAME> after <function=
    PARAMETERS = "parameters"  # between parameters: <parameter= or </function>
    KEY = "key"  # reading KEY> after <parameter=
    VALUE = "value"  # a parameter's value, up to </parameter>
    CLOSING = "closing"  # after </function>: its </tool_call>


_JSON_TYPES: dict[type, tuple[str, ...]] = {
    dict: ("object",),
    list: ("array",),
    bool: ("boolean",),
    int: ("integer", "number"),
    float: ("number",),
    type(None): ("null",),
}


def value_types(tool: ToolSpec | None, key: str) -> frozenset[str]:
    """The JSON types a parameter's schema allows (empty: any)."""
    properties = (tool.parameters if tool else {}).get("properties") or {}
    schema = properties.get(key)
    if not isinstance(schema, dict):
        return frozenset()
    types: set[str] = set()
    for option in [schema, *schema.get("anyOf", ()), *schema.get("oneOf", ())]:
        if isinstance(option, dict):
            named = option.get("type", ())
            types.update([named] if isinstance(named, str) else named)
    return frozenset(types)


def convert_value(text: str, types: frozenset[str]) -> Any:
    """A parameter's text as the schema types it: JSON where it parses as an allowed non-string
    type, else the text itself (never a failure)."""
    if types == {"string"}:
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    allowed = _JSON_TYPES.get(type(value), ())
    if isinstance(value, str) or (types and not types.intersection(allowed)):
        return text
    return value


class Qwen3CoderParser(StreamParser):
    """Qwen3-Coder's calls, as many as the model writes. As llama.cpp accepts, a call may also
    open with `<function=NAME>` without its `<tool_call>` (then NAME must be one of the
    tools, as code can hold `<function=` too). Text that does not follow the format is text."""

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        super().__init__()
        self._tools = {tool.name: tool for tool in tools}
        self._mode = Mode.TEXT
        self._prefix = ""  # what was read of a call not yet announced
        self._bare = False  # the call opened with <function= alone
        self._tool: ToolSpec | None = None
        self._sent: list[str] = []  # the arguments' JSON sent so far
        self._types: frozenset[str] = frozenset()
        self._value: list[str] = []  # a value not streamed (not a string), until its end
        self._value_start = False

    def _step(self) -> bool:
        before = (len(self._pending), self._mode)
        match self._mode:
            case Mode.TEXT:
                tag = self._text_until((_OPEN, _FUNCTION))
                if tag is not None:
                    self._bare = tag == _FUNCTION
                    self._prefix = tag
                    self._mode = Mode.FUNCTION if self._bare else Mode.OPENED
            case Mode.OPENED:
                self._opened()
            case Mode.FUNCTION:
                self._function_name()
            case Mode.PARAMETERS:
                self._between_parameters()
            case Mode.KEY:
                self._key()
            case Mode.VALUE:
                self._value_text()
            case Mode.CLOSING:
                self._closing()
        return (len(self._pending), self._mode) != before

    def _opened(self) -> None:
        rest = self._pending.lstrip(_WHITESPACE)
        if rest.startswith(_FUNCTION):
            self._prefix += self._pending[: len(self._pending) - len(rest)] + _FUNCTION
            self._pending = rest[len(_FUNCTION) :]
            self._mode = Mode.FUNCTION
        elif not _FUNCTION.startswith(rest):
            self._give_back()

    def _function_name(self) -> None:
        name = self._read_name()
        if name is None:
            return
        if self._bare and self._tools and name not in self._tools:
            self._prefix += name + ">"
            self._give_back()
            return
        self._tool = self._tools.get(name)
        self._sent, self._prefix = [], ""
        self._start_call(name)
        self._mode = Mode.PARAMETERS

    def _read_name(self) -> str | None:
        """NAME> of <function=NAME> or <parameter=NAME>: the name once whole, consumed; a name
        that cannot be one gives what was read back."""
        end = self._pending.find(">")
        name = self._pending if end == -1 else self._pending[:end]
        malformed = len(name) > _LONGEST_NAME or any(c in _WHITESPACE + "<" for c in name)
        if malformed or (end != -1 and not name):
            self._give_back()
            return None
        if end == -1:
            return None
        self._pending = self._pending[end + 1 :]
        return name

    def _give_back(self) -> None:
        """What was read is not a call (or, once announced, the call ends here): text."""
        if self._mode in (Mode.OPENED, Mode.FUNCTION):
            self._text(self._prefix)
        elif self._mode is not Mode.CLOSING:
            self._end_arguments()
        self._prefix, self._mode = "", Mode.TEXT

    def _between_parameters(self) -> None:
        rest = self._pending.lstrip(_WHITESPACE)
        for tag, mode in ((_PARAMETER, Mode.KEY), (_FUNCTION_END, Mode.CLOSING)):
            if rest.startswith(tag):
                self._pending = rest[len(tag) :]
                if mode is Mode.CLOSING:
                    self._end_arguments()
                self._mode = mode
                return
        if not (_PARAMETER.startswith(rest) or _FUNCTION_END.startswith(rest)):
            self._pending = rest
            self._give_back()

    def _key(self) -> None:
        key = self._read_name()
        if key is None:
            return
        self._types = value_types(self._tool, key)
        opening = '"' if self._types == {"string"} else ""
        separator = ", " if self._sent else "{"
        self._send(f"{separator}{json.dumps(key)}: {opening}")
        self._value = []
        self._mode = Mode.VALUE
        self._value_start = True

    def _value_text(self) -> None:
        if self._value_start:  # the value starts on its own line: that newline is markup
            if not self._pending:
                return
            self._pending = self._pending.removeprefix("\n")
            self._value_start = False
        end = self._pending.find(_PARAMETER_END)
        if end != -1:
            text = self._pending[:end].removesuffix("\n")
            self._pending = self._pending[end + len(_PARAMETER_END) :]
        else:
            hold = max(
                partial_suffix(self._pending, "\n" + _PARAMETER_END),
                partial_suffix(self._pending, _PARAMETER_END),
            )
            text = self._pending[: len(self._pending) - hold]
            self._pending = self._pending[len(text) :]
        streamed = self._types == {"string"}
        if streamed:
            self._send(json.dumps(text)[1:-1])
        self._value.append(text)
        if end == -1:
            return
        whole = "".join(self._value)
        self._send('"' if streamed else json.dumps(convert_value(whole, self._types)))
        self._mode = Mode.PARAMETERS

    def _closing(self) -> None:
        rest = self._pending.lstrip(_WHITESPACE)
        if rest.startswith(_CLOSE) and not self._bare:
            self._pending = rest[len(_CLOSE) :]
            self._mode = Mode.TEXT
        elif self._bare or not _CLOSE.startswith(rest):
            self._mode = Mode.TEXT  # no closing tag: what follows is text

    def _send(self, fragment: str) -> None:
        self._sent.append(fragment)
        self._arguments(fragment)

    def _end_arguments(self) -> None:
        """The call's arguments are whole: `</function>`, or text where a parameter should be
        (the model went on in prose: the call ends with the parameters it has)."""
        self._send("}" if self._sent else "{}")
        self._end_call("".join(self._sent))

    def _end(self) -> None:
        if self._mode in (Mode.TEXT, Mode.OPENED, Mode.FUNCTION):
            self._text(self._prefix + self._pending)
        elif self._mode is Mode.CLOSING and not _CLOSE.startswith(self._pending.strip()):
            self._text(self._pending)
        # else: a partial </tool_call>, or a call cut off before </function>, which is dropped
        # (as a JSON call cut off inside its arguments is)
