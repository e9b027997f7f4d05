"""Resumable streams: a generation that outlives its connection for a grace period.

No anchor (KoboldCpp, llama-server, Ollama) resumes a broken stream: a dropped Wi-Fi or a
tunnel hiccup loses the reply. A client that opts in (`stream_options.resumable`, KoboldAI's
`resumable`, or the `X-Hearth-Resumable: 1` header) gets a stream whose events are kept:

- a producer task reads the generation's bursts (as a plain stream's response would) and
  appends each SSE event, already encoded with its `id:` (its index), to a `RetainedStream`;
- every connection, the first one included, is a follower: it sends the retained events from
  a position on, then waits for more (keep-alive comments while silent);
- when the last follower leaves an unfinished stream, its generation keeps running for
  `--resumegrace` seconds; `GET /api/extra/stream/{name}` with `Last-Event-ID` attaches a new
  follower after that event. Nobody back in time: the generation is aborted and forgotten.
  A finished stream is kept for the same grace after its last follower left.

Memory is bounded twice: one stream's retained bytes (past that its generation is aborted,
ending normally with the dialect's own ending), and all streams' bytes together (finished,
unfollowed streams are forgotten first, oldest first; then the growing one is aborted).

llama-server's way is the same streams: `X-Conversation-Id` retains a stream by conversation
too, read as bytes from any offset (server/dialects/streams/stream_resume_log.py,
llama/stream_resume.py).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from sse_starlette import ServerSentEvent

from server.dialects.chat.plans import ChatPlan
from server.dialects.chat.request_fields import new_id
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.streams.stream_resume_log import ConversationLog, read_bytes
from server.dialects.streams.streaming import KEEPALIVE_BYTES, encode_event, sse_bytes_response
from server.dialects.streams.wire import SSEFormat, WireFormat

logger = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 30.0
# One stream's retained events: a 16k-token chat reply in OpenAI chunks is about 4 MB.
DEFAULT_STREAM_BYTES = 16 * 1024 * 1024
DEFAULT_TOTAL_BYTES = 256 * 1024 * 1024
STREAM_NAME_HEADER = "X-Hearth-Stream-Id"
CONVERSATION_HEADER = "x-conversation-id"  # llama-server's opt-in (its web UI sends it)

# What a stream's first name (the header's, the resume URL's) may hold: a genkey is any string,
# but a header value and a URL path segment take only some characters as they are.
_URL_SAFE = re.compile(r"[A-Za-z0-9._~-]{1,200}")


def url_safe(name: str) -> bool:
    return _URL_SAFE.fullmatch(name) is not None


@dataclass(eq=False)
class RetainedStream:
    """One resumable generation's events, as sent, and who is reading them."""

    names: tuple[str, ...]  # the response id, and the genkey when the client gave one
    dialect: Dialect
    events: list[bytes] = field(default_factory=list)  # index = the event's SSE id
    size: int = 0
    finished: bool = False
    aborted: bool = False  # its retention filled: the generation was stopped
    forgotten: bool = False  # no longer kept: nobody can fetch it again
    followers: int = 0
    stop_generation: Callable[[], None] = lambda: None
    conversation: ConversationLog | None = None  # asked for llama-server's way
    producer: asyncio.Task[None] | None = None
    expiry: asyncio.TimerHandle | None = None
    # Replaced on every change: a follower waits on the one it saw, so none misses a wake-up.
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class ResumableStreams:
    """Every retained stream of one app, by name (app.state.resumable_streams)."""

    def __init__(
        self,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        *,
        stream_bytes: int = DEFAULT_STREAM_BYTES,
        total_bytes: int = DEFAULT_TOTAL_BYTES,
    ) -> None:
        self.grace_seconds = grace_seconds
        self.stream_bytes = stream_bytes
        self.total_bytes = total_bytes
        self._by_name: dict[str, RetainedStream] = {}
        # llama-server's X-Conversation-Id, one stream each: apart, as no name fetches these.
        self.by_conversation: dict[str, RetainedStream] = {}
        self._streams: list[RetainedStream] = []  # oldest first
        self.retained_bytes = 0

    @property
    def count(self) -> int:
        return len(self._streams)

    def find(self, name: str) -> RetainedStream | None:
        return self._by_name.get(name)

    def stop_conversation(self, conversation_id: str) -> None:
        """llama-server's Stop: the conversation's generation cancelled, its stream forgotten."""
        stream = self.by_conversation.get(conversation_id)
        if stream is not None:
            self._forget(stream)

    def check_names(self, names: Iterable[str], dialect: Dialect) -> None:
        """Refuse a name that already names a generation still running (a reused genkey)."""
        for name in names:
            taken = self._by_name.get(name)
            if taken is not None and not taken.finished:
                raise APIError(
                    400,
                    f"{name!r} already names a resumable stream that is still running",
                    dialect=dialect,
                )

    def open(
        self,
        names: Sequence[str],
        dialect: Dialect,
        bursts: AsyncIterator[Sequence[ServerSentEvent] | None],
        stop_generation: Callable[[], None],
        conversation_id: str | None = None,
    ) -> RetainedStream:
        """Start retaining a generation's stream; its first follower is the caller's."""
        stream = RetainedStream(tuple(dict.fromkeys(names)), dialect)
        stream.stop_generation = stop_generation
        if conversation_id is not None:
            # One stream per conversation, as llama-server: a new one stops the old.
            self.stop_conversation(conversation_id)
            stream.conversation = ConversationLog(conversation_id)
            self.by_conversation[conversation_id] = stream
        for name in stream.names:
            old = self._by_name.get(name)
            if old is not None:  # a finished stream of the same genkey: the new one wins
                self._forget(old)
        for name in stream.names:
            self._by_name[name] = stream
        self._streams.append(stream)
        stream.producer = asyncio.ensure_future(self._produce(stream, bursts))
        return stream

    async def follow(
        self, stream: RetainedStream, after: int, keepalive_seconds: float
    ) -> AsyncIterator[bytes]:
        """The stream's events after event `after` (-1: all), then live ones as they come."""
        position = after + 1
        self._attach(stream)
        try:
            while True:
                changed = stream.changed  # taken before looking: a change after it wakes us
                if position < len(stream.events):
                    chunk = b"".join(stream.events[position:])
                    position = len(stream.events)
                    yield chunk
                    continue
                if stream.finished:
                    return
                try:
                    await asyncio.wait_for(changed.wait(), keepalive_seconds)
                except TimeoutError:
                    yield KEEPALIVE_BYTES
        finally:
            self._detach(stream)

    async def follow_bytes(self, stream: RetainedStream, offset: int) -> AsyncIterator[bytes]:
        """A conversation's bytes from byte `offset` on, then live ones as they come."""
        assert stream.conversation is not None
        self._attach(stream)
        try:
            async for chunk in read_bytes(stream, stream.conversation, offset):
                yield chunk
        finally:
            self._detach(stream)

    def shut_down(self) -> None:
        """Forget every stream and stop its producer (the app is stopping)."""
        for stream in list(self._streams):
            self._forget(stream)

    # -- internals --------------------------------------------------------------------------

    async def _produce(
        self,
        stream: RetainedStream,
        bursts: AsyncIterator[Sequence[ServerSentEvent] | None],
    ) -> None:
        try:
            async for burst in bursts:
                if stream.forgotten:
                    break  # forgotten (its cancellation can be lost in a wait_for race)
                if burst is None and stream.conversation is not None:
                    burst = []  # a keep-alive, kept: a conversation's readers count its bytes
                elif not burst:
                    continue  # a keep-alive: each follower sends its own while silent
                first = len(stream.events)
                encoded = [encode_event(event, first + i) for i, event in enumerate(burst)]
                stream.events.extend(encoded)
                if stream.conversation is not None:
                    stream.conversation.append(b"".join(encoded) or KEEPALIVE_BYTES)
                grown = sum(map(len, encoded)) or len(KEEPALIVE_BYTES)
                stream.size += grown
                self.retained_bytes += grown
                stream.notify()
                if not stream.aborted and not self._room_for(stream):
                    # Stopped, not cut: the generation's ending still comes, and is kept.
                    stream.aborted = True
                    logger.warning(
                        "[%s] resumable stream aborted: its retained events filled %d bytes",
                        stream.names[0],
                        stream.size,
                    )
                    stream.stop_generation()
        finally:
            aclose = getattr(bursts, "aclose", None)
            if aclose is not None:
                await aclose()  # now, not at garbage collection: it ends the job's reading
            stream.finished = True
            if stream.conversation is not None:
                stream.conversation.finish()
            stream.notify()
            if stream.followers == 0 and not stream.forgotten:
                self._arm_expiry(stream)

    def _room_for(self, stream: RetainedStream) -> bool:
        if stream.size > self.stream_bytes:
            return False
        for old in list(self._streams):  # finished, unread streams make room first
            if self.retained_bytes <= self.total_bytes:
                break
            if old is not stream and old.finished and old.followers == 0:
                self._forget(old)
        return self.retained_bytes <= self.total_bytes

    def _attach(self, stream: RetainedStream) -> None:
        stream.followers += 1
        if stream.expiry is not None:
            stream.expiry.cancel()
            stream.expiry = None

    def _detach(self, stream: RetainedStream) -> None:
        stream.followers -= 1
        if stream.followers == 0 and not stream.forgotten:
            self._arm_expiry(stream)

    def _arm_expiry(self, stream: RetainedStream) -> None:
        if stream.expiry is not None:
            stream.expiry.cancel()
        loop = asyncio.get_running_loop()
        stream.expiry = loop.call_later(self.grace_seconds, self._expire, stream)

    def _expire(self, stream: RetainedStream) -> None:
        stream.expiry = None
        if stream.followers:
            return
        if not stream.finished:
            logger.info("[%s] resumable stream not resumed in time: aborted", stream.names[0])
        self._forget(stream)

    def _forget(self, stream: RetainedStream) -> None:
        """Drop the stream; a generation still running is cancelled with its producer."""
        if stream.expiry is not None:
            stream.expiry.cancel()
            stream.expiry = None
        if stream.producer is not None and not stream.producer.done():
            stream.stop_generation()
            stream.producer.cancel()  # closing the bursts also cancels the job
        for name in stream.names:
            if self._by_name.get(name) is stream:
                del self._by_name[name]
        if stream.conversation is not None:
            if self.by_conversation.get(stream.conversation.conversation_id) is stream:
                del self.by_conversation[stream.conversation.conversation_id]
            stream.conversation.clear()
        if not stream.forgotten:
            stream.forgotten = True
            self._streams.remove(stream)
            self.retained_bytes -= stream.size
        stream.events = []
        stream.finished = True
        stream.notify()


def stream_response(
    streams: ResumableStreams, stream: RetainedStream, after: int, keepalive_seconds: float
) -> Response:
    """A follower's SSE response, after event `after`."""
    return named_response(stream, streams.follow(stream, after, keepalive_seconds))


def named_response(stream: RetainedStream, chunks: AsyncIterator[bytes]) -> Response:
    """A reader's SSE response; its header names the stream for a later resume."""
    response = sse_bytes_response(chunks)
    response.headers[STREAM_NAME_HEADER] = stream.names[0]  # URL-safe: see url_safe
    return response


def wants_resumable(request: Request) -> bool:
    """The header forms of the opt-in, which every SSE route accepts: Hearth's, or
    llama-server's conversation id."""
    hearth = request.headers.get("x-hearth-resumable", "").strip().lower() in {"1", "true", "yes"}
    return hearth or conversation_id(request) is not None


def conversation_id(request: Request) -> str | None:
    return request.headers.get(CONVERSATION_HEADER) or None


def resumable_names(request: Request, plan: ChatPlan, wire: WireFormat[Any]) -> list[str] | None:
    """What a resumable stream will be fetched by (None: this wire cannot be resumed, as only
    SSE streams are), refused with a 400 before any work if a running stream has a name."""
    if not isinstance(wire, SSEFormat):
        return None
    names = _stream_names(plan, wire)
    request.app.state.resumable_streams.check_names(names, wire.dialect)
    return names


def _stream_names(plan: ChatPlan, wire: WireFormat[Any]) -> list[str]:
    """What a resumable stream is fetched by: the id its events carry (OpenAI's and
    Anthropic's response id), and the client's genkey (KoboldAI's name for a generation)."""
    generation = plan.generation
    genkey = [generation.genkey] if generation.genkey else []
    if wire.dialect is Dialect.KOBOLD and genkey and url_safe(generation.genkey):
        return genkey
    # The first name goes in the header and the resume URL, so it must be URL-safe; KoboldAI's
    # own request ids are counted, so guessable: a random name stands in for them.
    first = new_id("kai-stream-") if wire.dialect is Dialect.KOBOLD else generation.request_id
    return [first, *genkey]


def retained(
    request: Request,
    names: Sequence[str],
    dialect: Dialect,
    bursts: AsyncIterator[Sequence[ServerSentEvent] | None],
    stop_generation: Callable[[], None],
) -> Response:
    """A resumable stream: retained from its first event, this connection its first reader."""
    streams: ResumableStreams = request.app.state.resumable_streams
    conversation = conversation_id(request)
    stream = streams.open(names, dialect, bursts, stop_generation, conversation)
    if conversation is not None:  # its first reader reads bytes, as a later one does
        return named_response(stream, streams.follow_bytes(stream, 0))
    return stream_response(streams, stream, -1, request.app.state.keepalive_seconds)
