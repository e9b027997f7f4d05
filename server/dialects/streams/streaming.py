"""SSE responses shared by the streaming dialects: headers, keep-alive and disconnects.

A dialect supplies an async iterator of `ServerSentEvent`s, where `None` means "nothing to say
yet"; this module turns each `None` into an SSE comment line. KoboldCpp sends nothing at all
while a request waits in line or reads its prompt, which lets proxies and clients time out;
comments keep the connection visibly alive and every SSE parser ignores them.

sse-starlette watches for the client's disconnect and cancels the iterator, which reaches the
scheduler as `CancelledError` and frees the request's place at once.

Two ways a stream ends that the client did not ask for:
- `drop_when`: the scheduler sets this event when the client stopped reading (its unread
  events hit the bound); the response is then cancelled mid-send and the connection closed.
- server shutdown: the scheduler ends every job with a shutdown outcome, so each dialect sends
  its own ending; sse-starlette is told to wait for that (`SHUTDOWN_GRACE_SECONDS`) instead of
  cutting streams the moment the signal arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import TypeVar

from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# One comment line and no blank line: a blank line after an event that had an `id:` is read
# by the `openai` client as an empty event (it keeps the last id), which it fails to parse.
# A comment alone is valid SSE and still keeps proxies and clients from timing out.
KEEPALIVE_BYTES = b": keep-alive\n"
SSE_LINE_END = "\n"
# sse-starlette's own periodic ping is not needed: keep-alives are sent only when silent.
_NO_PERIODIC_PING = 24 * 3600
# How long a stream may take to send its ending once shutdown began; shorter than the HTTP
# server's own graceful-shutdown wait (server/process/http_server.py).
SHUTDOWN_GRACE_SECONDS = 2.5

# nginx's "client closed request": the status of an answer nobody is left to read.
CLIENT_GONE_STATUS = 499

T = TypeVar("T")


class KeepAliveClock:
    """When a stream last wrote, so that a keep-alive goes out whenever nothing has reached the
    wire for `seconds`, whatever the engine is doing: tokens held back (a tool call Ollama sends
    whole, text that may be a stop string) arrive as events but put no byte on the wire, and a
    proxy with a read timeout cuts a stream that is silent, however busy the model is."""

    LOOKS_PER_PERIOD = 5  # a silent stream is looked at this often per `seconds`

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._last_write = time.monotonic()

    @property
    def look_every(self) -> float:
        """How long to wait for events before looking whether a keep-alive is due."""
        return self.seconds / self.LOOKS_PER_PERIOD

    def wrote(self) -> None:
        self._last_write = time.monotonic()

    def keepalive_due(self) -> bool:
        """True (and counted as a write) when the wire has been silent for `seconds`."""
        if time.monotonic() - self._last_write < self.seconds:
            return False
        self.wrote()
        return True


class ClientDisconnectedError(Exception):
    """The client left before a non-streamed answer was ready (`unless_disconnected`).

    Raised from wherever the wait was and answered by `client_gone_handler`, which the app
    registers, so no route checks for it."""


async def client_gone_handler(_request: Request, _exc: Exception) -> Response:
    return Response(status_code=CLIENT_GONE_STATUS)


def ndjson_response(
    bursts: AsyncIterator[Sequence[Mapping[str, object]] | None], drop_when: asyncio.Event
) -> Response:
    """Ollama's framing: one compact JSON object per line, each burst in one write.
    Heartbeats must be valid objects, so the dialect sends those itself."""
    response = StreamingResponse(
        _encode_lines(bursts), media_type="application/x-ndjson", headers=STREAM_HEADERS
    )
    return DroppableResponse(response, drop_when)


async def _encode_lines(
    bursts: AsyncIterator[Sequence[Mapping[str, object]] | None],
) -> AsyncIterator[bytes]:
    async for burst in bursts:
        if burst:
            yield b"".join(json.dumps(line).encode() + b"\n" for line in burst)


def sse_response(
    bursts: AsyncIterator[Sequence[ServerSentEvent] | None], drop_when: asyncio.Event
) -> Response:
    """Server-sent events, each burst in one write; None is a keep-alive comment."""
    return DroppableResponse(sse_bytes_response(_encoded(bursts)), drop_when)


def sse_bytes_response(chunks: AsyncIterator[bytes]) -> Response:
    """An SSE response of already encoded events (and comments)."""
    return EventSourceResponse(
        chunks,
        headers=STREAM_HEADERS,
        sep=SSE_LINE_END,
        ping=_NO_PERIODIC_PING,
        shutdown_grace_period=SHUTDOWN_GRACE_SECONDS,
    )


class DroppableResponse(Response):
    """A streaming response that is cancelled (connection closed) when `drop_when` is set.

    A client that stops reading leaves the response blocked in `send` for as long as it likes;
    cancelling is the only way out, and it runs the stream's cleanup (which cancels the job).
    """

    def __init__(self, inner: Response, drop_when: asyncio.Event) -> None:
        super().__init__()
        self._inner = inner
        self._drop_when = drop_when

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.ensure_future(self._inner(scope, receive, send))
        dropped = asyncio.ensure_future(self._drop_when.wait())
        try:
            await asyncio.wait({streaming, dropped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            dropped.cancel()
            if not streaming.done():
                streaming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await streaming


async def _encoded(bursts: AsyncIterator[Sequence[ServerSentEvent] | None]) -> AsyncIterator[bytes]:
    sent = 0
    async for burst in bursts:
        if burst is None:
            yield KEEPALIVE_BYTES
        elif burst:
            yield b"".join(encode_event(event, sent + i) for i, event in enumerate(burst))
            sent += len(burst)


def encode_event(event: ServerSentEvent, event_id: int) -> bytes:
    """One SSE event with LF line ends (sse-starlette's own default is CRLF, which naive
    line-based clients mis-split). Payloads are single-line JSON, so no data splitting.

    Every event carries its index in the stream as `id:`, which a resumed stream's
    `Last-Event-ID` names (server/dialects/streams/resumable.py)."""
    head = f"event: {event.event}\n" if event.event else ""
    return f"id: {event_id}\n{head}data: {event.data}\n\n".encode()


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
