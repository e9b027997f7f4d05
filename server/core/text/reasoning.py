"""A thinking model's thought told from its answer, while the text streams.

Models mark the thought two ways. Most write it between tags (`<think>…</think>`: Qwen3,
DeepSeek-R1, GLM; `[THINK]…[/THINK]`: Magistral); their template may open the tag itself, so
the output starts inside the thought (`thinking_open`), or the model writes the tag first.
gpt-oss writes harmony messages, each on a channel: `<|channel|>analysis<|message|>…<|end|>`
is the thought, `<|start|>assistant<|channel|>final<|message|>…` the answer, and commentary
addressed to a tool (`<|channel|>commentary to=functions.NAME … <|message|>{…}<|call|>`) a
tool call. The splitters here take text pieces as they come and hand back `Piece`s: text is
held back only while it may still be (part of) a marker, never longer.

As llama-server does: a thought must open at the very start of the reply (leading whitespace
aside), one still open when the reply ends is thought, and the whitespace right after an
opening or closing tag is dropped.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class PieceKind(enum.Enum):
    ANSWER = "answer"
    REASONING = "reasoning"
    # A harmony message addressed to a tool, verbatim (header and end marker included), for a
    # tool-call parser to read: `<|channel|>commentary to=functions.f <|constrain|>json
    # <|message|>{"a": 1}<|call|>`.
    COMMENTARY = "commentary"


@dataclass(frozen=True, slots=True)
class Piece:
    kind: PieceKind
    text: str


# Where each family marks its thought (llama.cpp's common/parsers name the same ones).
THINK_TAGS = ("<think>", "</think>")
KNOWN_TAGS = (
    THINK_TAGS,
    ("[THINK]", "[/THINK]"),  # Magistral, Ministral
    ("<seed:think>", "</seed:think>"),  # Seed-OSS
    ("<|START_THINKING|>", "<|END_THINKING|>"),  # Command A Reasoning
)
# gpt-oss: the thought is the analysis channel's message (what a budget closes with <|end|>).
HARMONY_TAGS = ("<|channel|>analysis<|message|>", "<|end|>")
_HARMONY_MARKERS = ("<|channel|>", "<|message|>", "<|start|>")
# A template that takes one of these can think even if it names no tag (it passes the
# thought back or turns it on and off).
_THINKING_WORDS = ("enable_thinking", "reasoning_content")


@dataclass(frozen=True, slots=True)
class ThinkingSyntax:
    """How a model marks its thought: tags, or harmony channels."""

    tags: tuple[str, str] = THINK_TAGS
    harmony: bool = False


HARMONY = ThinkingSyntax(HARMONY_TAGS, harmony=True)


def thinking_syntax(template_source: str | None) -> ThinkingSyntax | None:
    """The thought markers a chat template shows its model uses, or None when it shows no
    sign of thinking (Ollama reads a template for its tags the same way)."""
    if not template_source:
        return None
    if all(marker in template_source for marker in _HARMONY_MARKERS):
        return HARMONY
    for tags in KNOWN_TAGS:
        if tags[0] in template_source or tags[1] in template_source:
            return ThinkingSyntax(tags)
    if any(word in template_source for word in _THINKING_WORDS):
        return ThinkingSyntax()
    return None


def prompt_opens_thought(prompt: str, tags: tuple[str, str], prefill: str | None = None) -> bool:
    """Whether the model's reply starts inside a thought: the prompt ends with the opening
    tag (the template opened it), or a continued assistant message (`prefill`) holds an
    opening tag its text does not close."""
    if prompt.rstrip().endswith(tags[0].rstrip()):
        return True
    if prefill:
        return prefill.rfind(tags[0]) > prefill.rfind(tags[1])
    return False


def new_splitter(syntax: ThinkingSyntax, start_inside: bool) -> TagSplitter | HarmonySplitter:
    return (
        HarmonySplitter(start_inside) if syntax.harmony else TagSplitter(syntax.tags, start_inside)
    )


def partial_suffix(text: str, marker: str) -> int:
    """The length of the longest end of `text` that begins `marker` (and is not all of it)."""
    for length in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-length:]):
            return length
    return 0


class _TagState(enum.Enum):
    BEFORE = "before"  # the reply's start: the opening tag may still come
    THOUGHT_START = "thought start"  # just inside: whitespace (and a repeated open tag) go
    THOUGHT = "thought"
    ANSWER_START = "answer start"  # just after the closing tag: whitespace goes
    ANSWER = "answer"


class _Stepping:
    """A splitter that holds text back (`_pending`) and takes steps over it until one says
    it must wait for more."""

    _pending: str

    def feed(self, text: str) -> list[Piece]:
        self._pending += text
        pieces: list[Piece] = []
        while self._pending and self._step(pieces):
            pass
        return pieces

    def _step(self, pieces: list[Piece]) -> bool:
        raise NotImplementedError


class TagSplitter(_Stepping):
    """Splits `<think>…</think>`-style output: `feed` each piece of text, `finish` at the end."""

    def __init__(self, tags: tuple[str, str] = THINK_TAGS, start_inside: bool = False) -> None:
        self._open, self._close = tags
        self._pending = ""
        self._state = _TagState.THOUGHT_START if start_inside else _TagState.BEFORE
        # A template that opened the thought may still see the model write the tag again.
        self._may_repeat_open = start_inside

    @property
    def in_thought(self) -> bool:
        return self._state in (_TagState.THOUGHT_START, _TagState.THOUGHT)

    def finish(self) -> list[Piece]:
        """The reply ended: what is held back is text after all (thought, if inside one)."""
        rest, self._pending = self._pending, ""
        if not rest or self._state is _TagState.ANSWER_START:
            return []
        return [Piece(PieceKind.REASONING if self.in_thought else PieceKind.ANSWER, rest)]

    def _step(self, pieces: list[Piece]) -> bool:
        """Consume what can be decided of the pending text; False while waiting for more."""
        match self._state:
            case _TagState.BEFORE:
                return self._before()
            case _TagState.THOUGHT_START:
                return self._thought_start()
            case _TagState.THOUGHT:
                return self._thought(pieces)
            case _TagState.ANSWER_START:
                self._pending = self._pending.lstrip()
                if self._pending:
                    self._state = _TagState.ANSWER
                return bool(self._pending)
        pieces.append(Piece(PieceKind.ANSWER, self._pending))
        self._pending = ""
        return False

    def _before(self) -> bool:
        stripped = self._pending.lstrip()
        if stripped.startswith(self._open):
            self._pending = stripped[len(self._open) :]
            self._state = _TagState.THOUGHT_START
            return True
        if self._open.startswith(stripped):
            return False  # whitespace, or the tag's beginning: it may still be the tag
        self._state = _TagState.ANSWER  # no thought: the text is the answer as written
        return True

    def _thought_start(self) -> bool:
        stripped = self._pending.lstrip()
        if self._may_repeat_open and stripped.startswith(self._open):
            self._may_repeat_open = False
            self._pending = stripped[len(self._open) :]
            return True
        if self._may_repeat_open and stripped and self._open.startswith(stripped):
            self._pending = stripped
            return False
        self._pending = stripped
        if stripped:
            self._state = _TagState.THOUGHT
        return bool(stripped)

    def _thought(self, pieces: list[Piece]) -> bool:
        end = self._pending.find(self._close)
        if end != -1:
            if end:
                pieces.append(Piece(PieceKind.REASONING, self._pending[:end]))
            self._pending = self._pending[end + len(self._close) :]
            self._state = _TagState.ANSWER_START
            return True
        hold = partial_suffix(self._pending, self._close)
        ready = self._pending[: len(self._pending) - hold]
        if ready:
            pieces.append(Piece(PieceKind.REASONING, ready))
        self._pending = self._pending[len(ready) :]
        return False


# -- harmony (gpt-oss) -------------------------------------------------------------------------

_MESSAGE = "<|message|>"
_START = "<|start|>"
# What ends a message's body: its end, a tool call, the reply's end, or (a model that left
# out the end marker) the next message's start, which is not consumed.
_BODY_ENDS = ("<|end|>", "<|call|>", "<|return|>", _START)
# How a header may begin: the next message's start, its channel, or a recipient in the role
# (`<|start|>assistant to=functions.f<|channel|>commentary json<|message|>`).
_HEADER_STARTS = (_START, "<|channel|>", " to=", "to=")
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")
_RECIPIENT = re.compile(r"to=([^\s<]+)")
_ROLE_START = re.compile(r"^\s*<\|start\|>\s*assistant")
# A header never runs this long: past it the text is not harmony at all, and is the answer.
_HEADER_LIMIT = 256


class _Harmony(enum.Enum):
    HEADER = "header"  # a message's header, up to <|message|>: markup, never shown
    BODY = "body"
    PLAIN = "plain"  # the model does not write harmony: every piece is the answer


class HarmonySplitter(_Stepping):
    """Splits gpt-oss's harmony messages by channel: analysis → thought, final (and
    commentary to the user) → answer, commentary to a tool → COMMENTARY pieces."""

    def __init__(self, start_inside: bool = False) -> None:
        self._pending = ""
        self._state = _Harmony.BODY if start_inside else _Harmony.HEADER
        self._kind = PieceKind.REASONING if start_inside else PieceKind.ANSWER

    @property
    def in_thought(self) -> bool:
        return self._state is _Harmony.BODY and self._kind is PieceKind.REASONING

    def finish(self) -> list[Piece]:
        """The reply ended: an unfinished header is markup and goes; a body's held-back end
        is its text."""
        rest, self._pending = self._pending, ""
        if not rest or self._state is _Harmony.HEADER:
            return []
        return [Piece(self._kind if self._state is _Harmony.BODY else PieceKind.ANSWER, rest)]

    def _step(self, pieces: list[Piece]) -> bool:
        if self._state is _Harmony.PLAIN:
            pieces.append(Piece(PieceKind.ANSWER, self._pending))
            self._pending = ""
            return False
        if self._state is _Harmony.HEADER:
            return self._header(pieces)
        return self._body(pieces)

    def _header(self, pieces: list[Piece]) -> bool:
        at = self._pending.find(_MESSAGE)
        if at == -1:
            head = self._pending.lstrip()
            plausible = any(s.startswith(head) or head.startswith(s) for s in _HEADER_STARTS)
            if plausible and len(head) < _HEADER_LIMIT:
                return False  # still the header: wait for its <|message|>
            self._state = _Harmony.PLAIN
            return True
        header = self._pending[: at + len(_MESSAGE)]
        self._pending = self._pending[len(header) :]
        self._kind = _channel_kind(header)
        if self._kind is PieceKind.COMMENTARY:
            # Without its `<|start|>assistant`, as the reply's first message (whose start the
            # prompt wrote) looks: every call then reads the same.
            pieces.append(Piece(PieceKind.COMMENTARY, _ROLE_START.sub("", header)))
        self._state = _Harmony.BODY
        return True

    def _body(self, pieces: list[Piece]) -> bool:
        ends = [(at, end) for end in _BODY_ENDS if (at := self._pending.find(end)) != -1]
        if ends:
            at, end = min(ends)
            if at:
                pieces.append(Piece(self._kind, self._pending[:at]))
            consumed = at if end == _START else at + len(end)
            if self._kind is PieceKind.COMMENTARY and end != _START:
                pieces.append(Piece(PieceKind.COMMENTARY, end))
            self._pending = self._pending[consumed:]
            self._state = _Harmony.HEADER
            return True
        hold = max(partial_suffix(self._pending, end) for end in _BODY_ENDS)
        ready = self._pending[: len(self._pending) - hold]
        if ready:
            pieces.append(Piece(self._kind, ready))
        self._pending = self._pending[len(ready) :]
        return False


def _channel_kind(header: str) -> PieceKind:
    """What a message is, by its header: a tool call (any channel, with a recipient), the
    thought (analysis), or the answer (final, and commentary to the user: a preamble)."""
    # gpt-oss sometimes writes a stray `<|channel|>commentary to=assistant` before the real
    # channel (llama.cpp skips it too): the assistant is no tool, and the last channel counts.
    if any(to != "assistant" for to in _RECIPIENT.findall(header)):
        return PieceKind.COMMENTARY
    channels = _CHANNEL.findall(header)
    return PieceKind.REASONING if channels[-1:] == ["analysis"] else PieceKind.ANSWER
