"""Live parser for Mistral's tool calls, after `[TOOL_CALLS]`: a JSON list of calls (Nemo,
Small 3.1) or, per call, a name, `[ARGS]` and the arguments (Devstral, Small 3.2, Ministral,
Magistral).
"""

from __future__ import annotations

import enum
import re

from server.core.tool_calls.tool_formats_json import WHITESPACE, JsonCall, Phase
from server.core.tool_calls.tool_stream import StreamParser

_MISTRAL_TAG = "[TOOL_CALLS]"
_MISTRAL_ARGS = "[ARGS]"
_MISTRAL_CALL_ID = "[CALL_ID]"
_MISTRAL_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_MISTRAL_LONGEST_NAME = 256


class MistralMode(enum.Enum):
    TEXT = "text"
    AFTER_TAG = "after_tag"  # [TOOL_CALLS] read: a JSON list follows, or a name
    LIST = "list"  # inside [TOOL_CALLS][…]: between its objects
    NAME = "name"  # [TOOL_CALLS]name[CALL_ID]id[ARGS]: reading up to [ARGS]


class MistralParser(StreamParser):
    """Mistral: `[TOOL_CALLS][{"name": …, "arguments": {…}}, …]` (Nemo, Small 3.1), or each
    call as `[TOOL_CALLS]name[ARGS]{…}` (Devstral, Ministral/Magistral; Small 3.2 adds
    `[CALL_ID]id` before `[ARGS]`). Text before the tag passes through."""

    def __init__(self) -> None:
        super().__init__()
        self._mode = MistralMode.TEXT
        self._call: JsonCall | None = None
        self._prefix = ""  # text read since the tag that is not the call's own

    def _step(self) -> bool:
        if self._call is not None:
            return self._in_call(self._call)
        match self._mode:
            case MistralMode.TEXT:
                before = len(self._pending)
                if self._text_until((_MISTRAL_TAG,)) is not None:
                    self._mode, self._prefix = MistralMode.AFTER_TAG, _MISTRAL_TAG
                    return True
                return len(self._pending) != before
            case MistralMode.AFTER_TAG:
                return self._after_tag()
            case MistralMode.LIST:
                return self._in_list()
            case _:
                return self._read_name()

    def _after_tag(self) -> bool:
        rest = self._pending.lstrip(WHITESPACE)
        if not rest:
            return False
        self._prefix += self._pending[: len(self._pending) - len(rest)]
        self._pending = rest
        if rest[0] == "[":
            self._prefix += "["
            self._pending = rest[1:]
            self._mode = MistralMode.LIST
        elif _MISTRAL_NAME.match(rest[0]):
            self._mode = MistralMode.NAME
        else:
            self._give_back("")
        return True

    def _in_list(self) -> bool:
        rest = self._pending.lstrip(WHITESPACE + ",")
        if not rest:
            return False
        self._pending = rest
        if rest[0] == "{":
            self._call = JsonCall(self)
        elif rest[0] == "]":
            self._pending, self._mode = rest[1:], MistralMode.TEXT
        else:
            self._give_back("")  # not a list of calls after all: the rest is text
        return True

    def _read_name(self) -> bool:
        end = self._pending.find(_MISTRAL_ARGS)
        head = self._pending if end == -1 else self._pending[:end]
        name = head.split(_MISTRAL_CALL_ID)[0]
        if end == -1:
            if len(head) > _MISTRAL_LONGEST_NAME or any(c in WHITESPACE for c in head):
                self._give_back("")
                return True
            return False
        if not _MISTRAL_NAME.fullmatch(name):
            self._give_back("")
            return True
        self._prefix += head + _MISTRAL_ARGS
        self._pending = self._pending[end + len(_MISTRAL_ARGS) :]
        self._call = JsonCall(self, name)
        return True

    def _in_call(self, call: JsonCall) -> bool:
        used = call.take(self._pending)
        self._pending = self._pending[used:]
        if call.phase is Phase.FAILED:
            self._call = None
            self._give_back(call.raw)
            return True
        if call.phase is Phase.DONE:
            self._call, self._prefix = None, ""
            if self._mode is not MistralMode.LIST:
                self._mode = MistralMode.TEXT
            return True
        return used > 0

    def _give_back(self, raw: str) -> None:
        """Not a call: what was read since the tag is text, and so is what follows."""
        self._text(self._prefix)
        self._pending = raw + self._pending
        self._prefix, self._mode = "", MistralMode.TEXT

    def _end(self) -> None:
        if self._call is not None:
            leftover = self._call.cut_off()
            if leftover is not None:
                self._text(self._prefix + leftover + self._pending)
        elif self._mode is MistralMode.LIST:
            self._text(self._pending.strip(WHITESPACE + ",]"))
        else:
            self._text(self._prefix + self._pending)
