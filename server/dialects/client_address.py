"""The address of the client a request came from, and whose prompt it is (for
--privatecache), where the request's code cannot see them.

`admission.submit` records who asked on each `GenerationRequest` (for the launcher's live view)
without every route passing the HTTP request down: a pure ASGI middleware puts the address in
a context variable for the request's task, which the handler (and any task it starts) reads.
A pure ASGI middleware, not Starlette's `BaseHTTPMiddleware`, so streams are left alone.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

_client: ContextVar[str] = ContextVar("hearth_client_address", default="")
_owner: ContextVar[str] = ContextVar("hearth_cache_owner", default="")


def client_address() -> str:
    """`host:port` of the client of the request being handled ("" outside a request)."""
    return _client.get()


def cache_owner() -> str:
    """Whose prompt the request being handled sends: a digest of the API key it presented
    (Bearer or x-api-key), else of its host; cached prompts serve only the same owner when
    the cache is private."""
    return _owner.get()


def _owner_of(scope: Scope) -> str:
    headers = dict(scope.get("headers") or ())
    scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
    key = token.strip() if scheme.lower() == b"bearer" else headers.get(b"x-api-key", b"").strip()
    client = scope.get("client")
    who = b"key:" + key if key else b"host:" + (client[0].encode() if client else b"")
    return hashlib.sha256(who).hexdigest()[:16]


class ClientAddressMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        token = _client.set(f"{client[0]}:{client[1]}" if client else "")
        owner = _owner.set(_owner_of(scope))
        try:
            await self.app(scope, receive, send)
        finally:
            _owner.reset(owner)
            _client.reset(token)
