"""A strict little SSE reader for tests: it keeps comments and checks framing as it goes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class SSEEvent:
    event: str | None = None
    data: str = ""
    id: str | None = None
    comments: list[str] = field(default_factory=list)
    received_at: float = 0.0

    def json(self) -> Any:
        return json.loads(self.data)


def iter_sse(response: httpx.Response) -> Iterator[SSEEvent]:
    """Yield events as they arrive; a comment-only block comes out as an event with no data."""
    current = SSEEvent()
    for line in response.iter_lines():
        if line == "":
            if current.event is not None or current.data or current.comments:
                # Hearth numbers every event of a stream (comments carry no id).
                assert (current.id is not None) == bool(current.data), "an id on every event"
                current.received_at = time.monotonic()
                yield current
            current = SSEEvent()
        elif line.startswith(":"):
            current.comments.append(line[1:].strip())
        elif line.startswith("id: "):
            assert current.id is None, "one id line per event"
            current.id = line[len("id: ") :]
        elif line.startswith("event: "):
            current.event = line[len("event: ") :]
        elif line.startswith("data: "):
            assert not current.data, "one data line per event"
            current.data = line[len("data: ") :]
        else:
            raise AssertionError(f"unexpected SSE line {line!r}")
