"""KoboldCpp's --ratelimit (seconds between two generation requests from one client address)
and Hearth's --keyratelimit (the same per API key), answered with KoboldCpp's 503 and message
in each dialect's own error shape, with a Retry-After header.

What counts: a text generation, whichever dialect and route asked for it (KoboldAI's generate
and stream, OpenAI's completions, chat and responses, Anthropic's messages, Ollama's generate
and chat, llama-server's completion routes), counted once per HTTP request however many
choices (`n`) it asks for. GETs, token counting, embeddings, model loads and unloads (Ollama's
empty prompt, the admin reload) and slot actions are never limited: they are cheap, or the
server's own business. A request refused for another reason first (bad body, wrong key) does
not count; a refused request does not restart the wait.

The limit is checked where a generation takes its place in the queue (`admit`, called by
`admission.submit`), on the event loop: the client's address and key come from
server/dialects/edge/client_address.py (behind a trusted proxy, the real client), and the app's
`RateLimits` (`app.state.rate_limits`, None without limits) from a per-request ticket that
`RateLimitMiddleware` (pure ASGI, so streams are untouched) hands down in a context variable.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from server.core.types import GenerationRequest
from server.dialects.edge.client_address import api_key_digest, client_host
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, error_body
from server.settings.config import HearthSettings

# KoboldCpp's words, with the wait in whole seconds (rounded up: never "in 0 seconds").
RATE_LIMIT_MESSAGE = "You are sending requests too quickly. Please try again in {} seconds."
# Clients remembered per limit: past this the longest-waiting entry is forgotten early, so a
# flood of new addresses cannot grow the server's memory without end.
DEFAULT_MAX_ENTRIES = 65536

Clock = Callable[[], float]


class LastSeen:
    """When each client (an address or a key digest) was last admitted, for one limit of
    `seconds`: oldest first, so entries whose wait is over are dropped from the front."""

    def __init__(self, seconds: float, max_entries: int) -> None:
        self.seconds = seconds
        self._max_entries = max_entries
        self._admitted: OrderedDict[str, float] = OrderedDict()

    def wait(self, who: str, now: float) -> float:
        """Seconds `who` must still wait (0: none)."""
        self._forget_before(now - self.seconds)
        last = self._admitted.get(who)
        return 0.0 if last is None else max(0.0, last + self.seconds - now)

    def admitted(self, who: str, now: float) -> None:
        self._admitted[who] = now
        self._admitted.move_to_end(who)
        while len(self._admitted) > self._max_entries:
            self._admitted.popitem(last=False)

    def __len__(self) -> int:
        return len(self._admitted)

    def _forget_before(self, moment: float) -> None:
        while self._admitted:
            who, last = next(iter(self._admitted.items()))
            if last > moment:
                break
            del self._admitted[who]


class RateLimits:
    """Both limits of one app; `clock` is injectable so tests need no sleeps."""

    def __init__(
        self,
        address_seconds: float = 0,
        key_seconds: float = 0,
        *,
        clock: Clock = time.monotonic,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        self.clock = clock
        self.by_address = LastSeen(address_seconds, max_entries) if address_seconds else None
        self.by_key = LastSeen(key_seconds, max_entries) if key_seconds else None

    @classmethod
    def of(cls, settings: HearthSettings) -> RateLimits | None:
        """The limits --ratelimit and --keyratelimit ask for, or None when neither is set."""
        if not settings.ratelimit and not settings.keyratelimit:
            return None
        return cls(settings.ratelimit, settings.keyratelimit)

    def wait(self, host: str, key_digest: str) -> float:
        """0 when a generation from `host` with `key_digest` ("" for none) may run now, and
        it is recorded; else the seconds it must still wait, and nothing is recorded."""
        now = self.clock()
        limits = [(self.by_address, host), (self.by_key, key_digest)]
        applying = [(seen, who) for seen, who in limits if seen is not None and who]
        longest = max((seen.wait(who, now) for seen, who in applying), default=0.0)
        if longest > 0:
            return longest
        for seen, who in applying:
            seen.admitted(who, now)
        return 0.0


class RateLimitedError(APIError):
    """The 503 of a client that asks again too soon; `retry_after` whole seconds."""

    def __init__(self, dialect: Dialect, wait_seconds: float) -> None:
        self.retry_after = max(1, math.ceil(wait_seconds))
        message = RATE_LIMIT_MESSAGE.format(self.retry_after)
        super().__init__(503, message, ErrorKind.SERVER, dialect, body=_body(dialect, message))


def _body(dialect: Dialect, message: str) -> dict[str, object]:
    """The dialect's error shape, with the type or code its clients know a rate limit by."""
    if dialect is Dialect.KOBOLD:  # KoboldCpp's 503 body
        return {"detail": {"msg": message, "type": "service_unavailable"}}
    if dialect is Dialect.OPENAI:
        error = {"message": message, "type": "server_error", "param": None}
        return {"error": {**error, "code": "rate_limit_exceeded"}}
    if dialect is Dialect.ANTHROPIC:
        return {"type": "error", "error": {"type": "rate_limit_error", "message": message}}
    return dict(error_body(dialect, message, ErrorKind.SERVER))


async def rate_limited_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RateLimitedError)
    return JSONResponse(exc.body, exc.status, headers={"Retry-After": str(exc.retry_after)})


@dataclass(slots=True)
class _Ticket:
    """One HTTP request's standing: the app's limits, and whether it has been counted."""

    limits: RateLimits
    counted: bool = False


_ticket: ContextVar[_Ticket | None] = ContextVar("hearth_rate_ticket", default=None)


def is_limited_kind(generation: GenerationRequest) -> bool:
    """A text generation: not embeddings, a model load or unload, or a slot action."""
    return not (generation.embed_inputs or generation.model_only or generation.slot_action)


def admit(generation: GenerationRequest, dialect: Dialect) -> None:
    """Count the request being handled against the rate limits, once, if `generation` is a
    text generation; RateLimitedError (503, Retry-After) when its client must wait."""
    ticket = _ticket.get()
    if ticket is None or ticket.counted or not is_limited_kind(generation):
        return
    wait = ticket.limits.wait(client_host(), api_key_digest())
    if wait > 0:
        raise RateLimitedError(dialect, wait)
    ticket.counted = True


class RateLimitMiddleware:
    """Hands each HTTP request a ticket on the app's `state.rate_limits`, if it has any."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = getattr(scope.get("app"), "state", None)
        limits: RateLimits | None = getattr(state, "rate_limits", None)
        if scope["type"] != "http" or limits is None:
            await self.app(scope, receive, send)
            return
        token = _ticket.set(_Ticket(limits))
        try:
            await self.app(scope, receive, send)
        finally:
            _ticket.reset(token)
