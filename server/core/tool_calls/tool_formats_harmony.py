"""Live parser for gpt-oss's tool calls: harmony messages addressed to a function, such as

    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>
    {…}<|call|>

all on one line (or the recipient in the role: `<|start|>assistant to=functions.NAME
<|channel|>commentary json<|message|>{…}<|call|>`). The header is read whole (it is short),
then the JSON arguments stream. Every other message passes through as text, markup included,
so the parser reads either the raw output or what the thought splitter
(`reasoning.HarmonySplitter`) hands on: its COMMENTARY pieces (a call's header without
`<|start|>assistant`, its body, its end marker) and its ANSWER pieces (plain text), fed to one
parser in the order they come (server/dialects/chat/chat_reading.py's ChatReader does).
"""

from __future__ import annotations

import enum
import re

from server.core.tool_calls.tool_formats_json import JsonCall, Phase
from server.core.tool_calls.tool_stream import StreamParser

_MESSAGE = "<|message|>"
# Where a header begins: a message's start, its channel, or a recipient (after the splitter
# took `<|start|>assistant` off a header that names the recipient in its role).
_HEADER_STARTS = ("<|start|>", "<|channel|>", " to=functions.", "to=functions.")
_CALL_ENDS = ("<|call|>", "<|end|>", "<|return|>")
_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")
_WHITESPACE = " \t\r\n"
# A header is a role, a channel, a recipient and a content type: longer, it was not one.
_HEADER_LIMIT = 256


class HarmonyMode(enum.Enum):
    TEXT = "text"
    HEADER = "header"  # from a header's start to its <|message|>
    ENDING = "ending"  # after a call's arguments: its <|call|>


class HarmonyParser(StreamParser):
    """Calls in harmony commentary messages, as many as the model writes."""

    def __init__(self) -> None:
        super().__init__()
        self._mode = HarmonyMode.TEXT
        self._header = ""
        self._call: JsonCall | None = None

    def _step(self) -> bool:
        if self._call is not None:
            return self._in_call(self._call)
        before = (len(self._pending), self._mode)
        match self._mode:
            case HarmonyMode.TEXT:
                tag = self._text_until(_HEADER_STARTS)
                if tag is not None:
                    self._header, self._mode = tag, HarmonyMode.HEADER
            case HarmonyMode.HEADER:
                self._read_header()
            case HarmonyMode.ENDING:
                self._ending()
        return (len(self._pending), self._mode) != before

    def _read_header(self) -> None:
        at = self._pending.find(_MESSAGE)
        if at == -1:
            if len(self._header) + len(self._pending) > _HEADER_LIMIT:
                self._text(self._header)
                self._mode = HarmonyMode.TEXT
            return
        self._header += self._pending[: at + len(_MESSAGE)]
        self._pending = self._pending[at + len(_MESSAGE) :]
        recipient = _RECIPIENT.search(self._header)
        if recipient is None:
            self._text(self._header)  # a message to no function: text, for whoever reads on
            self._mode = HarmonyMode.TEXT
            return
        self._call = JsonCall(self, recipient.group(1))

    def _in_call(self, call: JsonCall) -> bool:
        used = call.take(self._pending)
        self._pending = self._pending[used:]
        if call.phase is Phase.FAILED:
            self._text(self._header)
            self._pending = call.raw + self._pending
            self._call, self._mode = None, HarmonyMode.TEXT
            return True
        if call.phase is Phase.DONE:
            self._call, self._mode = None, HarmonyMode.ENDING
            return True
        return used > 0

    def _ending(self) -> None:
        rest = self._pending.lstrip(_WHITESPACE)
        for end in _CALL_ENDS:
            if rest.startswith(end):
                self._pending, self._mode = rest[len(end) :], HarmonyMode.TEXT
                return
        if not any(end.startswith(rest) for end in _CALL_ENDS):
            self._mode = HarmonyMode.TEXT  # no end marker: what follows is read afresh

    def _end(self) -> None:
        if self._call is not None:
            leftover = self._call.cut_off()
            if leftover is not None:
                self._text(self._header + leftover + self._pending)
        elif self._mode is HarmonyMode.HEADER:
            self._text(self._header + self._pending)
        elif self._mode is HarmonyMode.TEXT:
            self._text(self._pending)
        elif not any(end.startswith(self._pending.strip()) for end in _CALL_ENDS):
            self._text(self._pending)  # after a call, text that is not its end marker
