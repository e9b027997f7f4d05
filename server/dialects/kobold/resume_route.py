"""Hearth's `GET /api/extra/stream/{name}`: a resumable stream (streams/resumable.py) read
again after a dropped connection, from the event after `Last-Event-ID`, in the dialect it was
asked in. Under KoboldAI's paths, as KoboldCpp's own extras are.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Header, Request
from fastapi.responses import Response

from server.dialects.edge.deps import key_required
from server.dialects.edge.errors import APIError, Dialect, ErrorKind
from server.dialects.streams.resumable import ResumableStreams, RetainedStream, stream_response

router = APIRouter(tags=["KoboldAI"])


@router.get(
    "/api/extra/stream/{name}",
    dependencies=[key_required(Dialect.KOBOLD)],
    response_class=Response,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def resume_stream(
    request: Request, name: str, last_event_id: str | None = Header(default=None)
) -> Response:
    """Hearth: resume a resumable stream (by its response id or genkey) after the event
    `Last-Event-ID` names (all of it without one): the events sent since, then live ones,
    in the dialect the stream was asked in."""
    streams: ResumableStreams = request.app.state.resumable_streams
    stream = streams.find(name)
    if stream is None:
        raise APIError(
            404,
            f"no resumable stream {name!r}: unknown, or its grace period ended",
            ErrorKind.NOT_FOUND,
            Dialect.KOBOLD,
        )
    after = _event_index(last_event_id, stream)
    keepalive: float = request.app.state.keepalive_seconds
    return stream_response(streams, stream, after, keepalive)


def _event_index(last_event_id: str | None, stream: RetainedStream) -> int:
    if last_event_id is None or not last_event_id.strip():
        return -1
    text = last_event_id.strip()
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    if not re.fullmatch(r"[0-9]{1,18}", text) or int(text) >= len(stream.events):
        raise APIError(
            400,
            f"Last-Event-ID {text!r} is not an event of this stream",
            dialect=stream.dialect,
        )
    return int(text)
