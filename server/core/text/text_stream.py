"""Turning token bytes into text a client may see: whole characters, stop strings held back.

Pure Python and engine-agnostic, so the rules can be tested without a model.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(slots=True)
class StopMatch:
    """A stop string was found: `text` is what still goes out before the stream ends."""

    text: str
    stop_sequence: str


class StopStringFilter:
    """Releases text only once it can no longer turn out to be the start of a stop string.

    `feed()` returns the text that is safe to send now, or a `StopMatch` when a stop string
    completed (generation should end). `flush()` returns whatever is still held back.
    """

    def __init__(self, stop: tuple[str, ...], trim_stop: bool = True) -> None:
        self._stops = tuple(s for s in stop if s)
        self._trim = trim_stop
        self._held = ""
        # Longest text that may need holding back: one character short of the longest stop.
        self._max_hold = max((len(s) for s in self._stops), default=1) - 1

    def feed(self, text: str) -> str | StopMatch:
        if not self._stops:
            return text
        buffer = self._held + text
        first_hit: tuple[int, str] | None = None
        for stop in self._stops:
            index = buffer.find(stop)
            if index != -1 and (first_hit is None or index < first_hit[0]):
                first_hit = (index, stop)
        if first_hit is not None:
            index, stop = first_hit
            self._held = ""
            kept = buffer[:index] if self._trim else buffer[: index + len(stop)]
            return StopMatch(kept, stop)
        hold = self._partial_stop_suffix(buffer)
        self._held = buffer[len(buffer) - hold :] if hold else ""
        return buffer[: len(buffer) - hold]

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def _partial_stop_suffix(self, buffer: str) -> int:
        """Length of the longest end of `buffer` that is a proper prefix of some stop string."""
        for length in range(min(self._max_hold, len(buffer)), 0, -1):
            tail = buffer[-length:]
            if any(stop.startswith(tail) for stop in self._stops):
                return length
        return 0


class Utf8Assembler:
    """Joins token byte pieces into text without ever splitting a multi-byte character.

    A token may end in the middle of a character (emoji, CJK); the incremental decoder keeps
    those bytes until the character is complete. Bytes that can never form valid UTF-8 become
    U+FFFD rather than an exception, so a strange model cannot crash a stream.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, piece: bytes) -> str:
        return self._decoder.decode(piece)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class TokenTextPipeline:
    """Token bytes in, sendable text out: UTF-8 assembly followed by stop-string holding.

    Every engine feeds its token pieces through one of these per request, so the rules about
    what a client may see live in one place.
    """

    def __init__(self, stop: tuple[str, ...], trim_stop: bool = True) -> None:
        self._assembler = Utf8Assembler()
        self._stops = StopStringFilter(stop, trim_stop)

    def push(self, piece: bytes) -> tuple[str, str | None]:
        """Returns the text that may be sent now, and the stop string if one just completed."""
        result = self._stops.feed(self._assembler.feed(piece))
        if isinstance(result, StopMatch):
            return result.text, result.stop_sequence
        return result, None

    def finish(self) -> str:
        """What was held back, once generation ended without a stop string."""
        tail = self._stops.feed(self._assembler.flush())
        held = tail.text if isinstance(tail, StopMatch) else tail
        return held + self._stops.flush()
