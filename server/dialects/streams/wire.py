"""How a dialect writes an answer: the base classes its formatter fills in.

A `WireFormat` serves one request and says how its answer looks, whole or streamed: the
opening, each chat event (and, when asked, how far the prompt is read), the ending. The ending
is one template for every dialect: a finished answer's end (`finished`), or, for a failed
generation, the error in the dialect's own shape in-band (the headers are long sent) followed
by what ends its stream (`after_failure`).
SSE and NDJSON framings are the two subclasses; `sse_json` (and `sse_typed`, named after its
`type`) is the one way an event's JSON becomes an SSE event.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar, cast

from fastapi.responses import Response
from sse_starlette import ServerSentEvent

from server.core.tool_calls.tool_stream import ChatStreamEvent
from server.core.types import Progress
from server.dialects.chat.answers import ChatAnswer, failed, failure_message
from server.dialects.edge.errors import Dialect, ErrorBody, ErrorKind, error_body
from server.dialects.streams.streaming import ndjson_response, sse_response

Item = TypeVar("Item")  # one unit of a dialect's stream: an SSE event, an NDJSON object
Burst = list[Item]


def sse_json(payload: Mapping[str, Any], event: str | None = None) -> ServerSentEvent:
    """An SSE event whose data is `payload` as one line of JSON (named `event`, if given)."""
    return ServerSentEvent(json.dumps(payload), event=event)


def sse_typed(payload: Mapping[str, Any]) -> ServerSentEvent:
    """`sse_json` named after the payload's `type`: Anthropic's and Responses' events, whose
    SDKs read the name and the type and need the two to agree."""
    return ServerSentEvent(json.dumps(payload), event=payload["type"])


class WireFormat(ABC, Generic[Item]):
    """How one dialect writes the answer to one request, whole or streamed.

    An instance serves one request, so it may keep the stream's state (open blocks, indexes).
    """

    dialect: ClassVar[Dialect]

    @abstractmethod
    def whole(self, answer: ChatAnswer) -> Mapping[str, Any]:
        """The non-streamed answer's JSON body."""

    def opening(self) -> Burst[Item]:
        """What a stream sends before any event (a role chunk, a start event)."""
        return []

    @abstractmethod
    def event(self, item: ChatStreamEvent) -> Burst[Item]:
        """A piece of text or of a tool call."""

    def progress(self, progress: Progress) -> Burst[Item]:
        """How far the prompt is read, for a request that asked (llama-server's
        `return_progress`); nothing in a dialect without such events."""
        return []

    def ending(self, answer: ChatAnswer) -> Burst[Item]:
        """The end of a stream: the answer's end, or its failure in-band."""
        if failed(answer.outcome):
            return self.failure(failure_message(answer.outcome), answer)
        return self.finished(answer)

    @abstractmethod
    def finished(self, answer: ChatAnswer) -> Burst[Item]:
        """The end of a stream whose generation finished: finish reason and usage."""

    def failure(self, message: str, answer: ChatAnswer) -> Burst[Item]:
        """A failure after the stream began: the dialect's error body (what its clients raise
        on), then what ends its stream."""
        body = error_body(self.dialect, message, ErrorKind.SERVER)
        return [self.error_item(body), *self.after_failure(answer)]

    @abstractmethod
    def error_item(self, body: ErrorBody) -> Item:
        """An error body as an item of this framing."""

    def after_failure(self, answer: ChatAnswer) -> Burst[Item]:
        """What still ends the stream after a failure (a last line, `[DONE]`); nothing here."""
        return []

    @abstractmethod
    def keepalive(self) -> Burst[Item] | None:
        """Sent while the generation is silent; None for the framing's own (SSE comment)."""

    @abstractmethod
    def response(
        self, bursts: AsyncIterator[Burst[Item] | None], drop_when: asyncio.Event
    ) -> Response:
        """The streaming response that frames these items."""


class SSEFormat(WireFormat[ServerSentEvent]):
    # The SSE name of an in-band error event (None: unnamed `data:`, as OpenAI's clients read).
    error_event: ClassVar[str | None] = None

    def error_item(self, body: ErrorBody) -> ServerSentEvent:
        return sse_json(body, self.error_event)

    def keepalive(self) -> Burst[ServerSentEvent] | None:
        return None  # an SSE comment (streaming.py), unless the dialect has its own event

    def response(
        self, bursts: AsyncIterator[Burst[ServerSentEvent] | None], drop_when: asyncio.Event
    ) -> Response:
        return sse_response(bursts, drop_when)


class ChoicesFormat(WireFormat[Item]):
    """A wire that also answers several choices of one request (OpenAI's `n`): each choice
    is its own generation, written by its own copy of the wire."""

    @abstractmethod
    def choice(self, index: int) -> ChoicesFormat[Item]:
        """The wire writing choice `index`: its opening, events and ending (which ends that
        choice only: `closing` ends the stream once every choice has)."""

    @abstractmethod
    def whole_choices(self, answers: Sequence[ChatAnswer]) -> Mapping[str, Any]:
        """The non-streamed answer holding every choice."""

    @abstractmethod
    def closing(self, answers: Sequence[ChatAnswer]) -> Burst[Item]:
        """The end of a stream of several choices, after each one's ending."""


Line = TypeVar("Line", bound=Mapping[str, object])  # one NDJSON object


class NDJSONFormat(WireFormat[Line]):
    def error_item(self, body: ErrorBody) -> Line:
        return cast(Line, body)  # any JSON object is a line; the dialect's type names its own

    def response(
        self, bursts: AsyncIterator[Burst[Line] | None], drop_when: asyncio.Event
    ) -> Response:
        return ndjson_response(bursts, drop_when)
