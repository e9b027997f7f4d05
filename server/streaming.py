"""SSE responses shared by the streaming dialects: headers, keep-alive and disconnects.

A dialect supplies an async iterator of `ServerSentEvent`s, where `None` means "nothing to say
yet"; this module turns each `None` into an SSE comment line. KoboldCpp sends nothing at all
while a request waits in line or reads its prompt, which lets proxies and clients time out;
comments keep the connection visibly alive and every SSE parser ignores them.

sse-starlette watches for the client's disconnect and cancels the iterator, which reaches the
scheduler as `CancelledError` and frees the request's place at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from fastapi import Request
from sse_starlette import EventSourceResponse, ServerSentEvent

STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE_COMMENT = "keep-alive"
# sse-starlette's own periodic ping is not needed: keep-alives are sent only when silent.
_NO_PERIODIC_PING = 24 * 3600

T = TypeVar("T")


class ClientDisconnectedError(Exception):
    """The client left before a non-streamed answer was ready."""


def sse_response(events: AsyncIterator[ServerSentEvent | None]) -> EventSourceResponse:
    return EventSourceResponse(
        _with_keepalive_comments(events),
        headers=STREAM_HEADERS,
        sep="\n",
        ping=_NO_PERIODIC_PING,
    )


async def _with_keepalive_comments(
    events: AsyncIterator[ServerSentEvent | None],
) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        yield ServerSentEvent(comment=KEEPALIVE_COMMENT) if event is None else event


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`, but cancel it and raise `ClientDisconnectedError` if the client leaves.

    FastAPI does not cancel a handler when its client disconnects, so a non-streamed request
    would otherwise keep its queue place and generate for nobody.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    if task.cancelled() or not task.done():
        raise ClientDisconnectedError
    return task.result()


async def _wait_for_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
