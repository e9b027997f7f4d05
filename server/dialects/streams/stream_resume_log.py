"""llama-server's resumable streams, as bytes: a conversation's stream read from any byte offset.

llama-server's web UI (and clients built on it) resumes a stream it asked for with
`X-Conversation-Id` by `GET /v1/stream?conv_id=…&from=N`, N counting the bytes it already
received. Hearth keeps such a stream as any resumable one (server/dialects/streams/resumable.py: the
same bounds, grace and Stop); this is the part that is about bytes: what was sent, keep-alives
included, so that an offset means the same to every reader, and where any offset falls.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(eq=False)
class ConversationLog:
    """One conversation's stream as bytes, in the writes they were sent in."""

    conversation_id: str
    started_at: int = field(default_factory=lambda: int(time.time()))
    completed_at: int = 0  # llama-server's lookup: 0 while it runs, then when it ended
    chunks: list[bytes] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # the byte offset just past each chunk

    @property
    def size(self) -> int:
        return self.ends[-1] if self.ends else 0

    @property
    def done(self) -> bool:
        return self.completed_at != 0

    def append(self, chunk: bytes) -> None:
        self.ends.append(self.size + len(chunk))
        self.chunks.append(chunk)

    def finish(self) -> None:
        self.completed_at = self.completed_at or int(time.time())

    def clear(self) -> None:
        self.finish()
        self.chunks, self.ends = [], []

    def read_from(self, offset: int) -> bytes:
        """Every byte kept from `offset` on (none when it is at or past the end)."""
        if offset >= self.size:
            return b""
        first = bisect.bisect_right(self.ends, offset)
        start = self.ends[first] - len(self.chunks[first])
        return self.chunks[first][offset - start :] + b"".join(self.chunks[first + 1 :])


class Followed(Protocol):
    """What a reader watches of a retained stream (server/dialects/resumable.RetainedStream)."""

    @property
    def changed(self) -> asyncio.Event: ...
    @property
    def finished(self) -> bool: ...
    @property
    def forgotten(self) -> bool: ...


async def read_bytes(stream: Followed, log: ConversationLog, offset: int) -> AsyncIterator[bytes]:
    """The bytes from `offset` on, then live ones until the stream ends or is forgotten. No
    keep-alives of its own: the stream records them. An offset past the end waits for the
    stream to reach it (llama-server's rule), and so ends empty if it never does."""
    while not stream.forgotten:
        changed = stream.changed  # taken before looking: a change after it wakes us
        if offset < log.size:
            chunk = log.read_from(offset)
            offset += len(chunk)
            yield chunk
            continue
        if stream.finished:
            return
        await changed.wait()
