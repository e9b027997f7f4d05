"""Turning a process's output bytes into whole lines (no Qt, so it is tested directly).

Reads can end in the middle of a multi-byte character or of a line; the incremental decoder
and the partial-line buffer keep both for the next read.
"""

from __future__ import annotations

import codecs


class LineAssembler:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""

    def feed(self, data: bytes) -> list[str]:
        text = self._partial + self._decoder.decode(data)
        *lines, self._partial = text.replace("\r\n", "\n").split("\n")
        return lines

    def flush(self) -> list[str]:
        rest = self._partial + self._decoder.decode(b"", final=True)
        self._partial = ""
        return [rest] if rest else []
