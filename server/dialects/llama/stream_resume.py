"""llama-server's stream resume routes, on Hearth's resumable streams
(dialects/streams/resumable.py).

A streamed generation asked with `X-Conversation-Id` (any SSE route) outlives its connection, as
any resumable stream does, and is kept under that conversation:

- `GET /v1/stream?conv_id=…&from=N`: its bytes from byte N on (all of them without `from`),
  then the live ones until it ends; a 404 for a conversation with no stream kept.
- `DELETE /v1/stream?conv_id=…`: Stop. The generation is cancelled and the stream forgotten;
  204 whether or not there was one, as llama-server.
- `POST /v1/streams/lookup` with `{"conversation_ids": […]}`: the state of the streams of the
  conversations named (an id also matches its `id::model` forms), never a listing of all.

The id travels in the query string as llama-server's does, since it may hold a model name with
slashes. Bounds are Hearth's: a stream nobody reads is kept for `--resumegrace` seconds (and
its generation aborted then if unfinished), within the same memory bounds as every resumable
stream; llama-server keeps a finished one five minutes and drops the oldest bytes of a long one.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel
from typing_extensions import TypedDict

from server.dialects.edge.deps import key_required
from server.dialects.edge.errors import APIError, Dialect, ErrorKind
from server.dialects.pipeline.routing import Served, json_route
from server.dialects.streams.resumable import ResumableStreams, named_response

router = APIRouter(tags=["llama-server"])
OPENAI = Dialect.OPENAI
# A model variant of a conversation's stream: "<conversation id>::<model>" (llama-server's).
MODEL_SEPARATOR = "::"
_OFFSET = re.compile(r"[0-9]{1,18}")


class StreamLookupRequest(BaseModel):
    # Anything else than a list of strings is passed over, as llama-server does.
    conversation_ids: Any = None


class StreamSession(TypedDict):
    conversation_id: str
    is_done: bool
    total_bytes: int
    started_at: int  # unix seconds
    completed_at: int  # unix seconds, 0 while it runs


@router.get(
    "/v1/stream",
    dependencies=[key_required(OPENAI)],
    response_class=Response,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def replay_stream(
    request: Request,
    conv_id: str = Query(default=""),
    from_byte: str = Query(default="", alias="from"),
) -> Response:
    """llama-server: a conversation's stream from byte `from` on, then live until it ends."""
    streams: ResumableStreams = request.app.state.resumable_streams
    stream = streams.by_conversation.get(_conversation(conv_id))
    if stream is None or stream.conversation is None:
        raise APIError(404, "Stream not found or expired", ErrorKind.NOT_FOUND, OPENAI)
    offset = from_byte.strip()
    if offset and not _OFFSET.fullmatch(offset):
        raise APIError(400, "Invalid 'from' offset", dialect=OPENAI)
    return named_response(stream, streams.follow_bytes(stream, int(offset or 0)))


@router.delete("/v1/stream", dependencies=[key_required(OPENAI)], status_code=204)
async def stop_stream(request: Request, conv_id: str = Query(default="")) -> Response:
    """llama-server's Stop: the conversation's generation cancelled, its stream forgotten."""
    streams: ResumableStreams = request.app.state.resumable_streams
    streams.stop_conversation(_conversation(conv_id))
    return Response(status_code=204)


@json_route(router, "/v1/streams/lookup", StreamLookupRequest, OPENAI)
async def lookup_streams(body: StreamLookupRequest, served: Served) -> list[StreamSession]:
    """llama-server: the streams kept of the conversations named, with their `::model` forms."""
    asked = body.conversation_ids if isinstance(body.conversation_ids, list) else []
    wanted = [name for name in asked if isinstance(name, str) and name]
    streams: ResumableStreams = served.request.app.state.resumable_streams
    found: list[StreamSession] = []
    for name in wanted:
        for conversation, stream in list(streams.by_conversation.items()):
            log = stream.conversation
            if log is None or not _names(name, conversation):
                continue
            found.append(
                {
                    "conversation_id": conversation,
                    "is_done": stream.finished,
                    "total_bytes": log.size,
                    "started_at": log.started_at,
                    "completed_at": log.completed_at,
                }
            )
    return found


def _names(asked: str, conversation: str) -> bool:
    return conversation == asked or conversation.startswith(asked + MODEL_SEPARATOR)


def _conversation(conv_id: str) -> str:
    if not conv_id:
        raise APIError(400, "Missing conversation id in path", dialect=OPENAI)
    return conv_id
