"""The address of the client a request came from, where the request's code cannot see it.

`admission.submit` records who asked on each `GenerationRequest` (for the launcher's live view)
without every route passing the HTTP request down: a pure ASGI middleware puts the address in
a context variable for the request's task, which the handler (and any task it starts) reads.
A pure ASGI middleware, not Starlette's `BaseHTTPMiddleware`, so streams are left alone.
"""

from __future__ import annotations

from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

_client: ContextVar[str] = ContextVar("hearth_client_address", default="")


def client_address() -> str:
    """`host:port` of the client of the request being handled ("" outside a request)."""
    return _client.get()


class ClientAddressMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        token = _client.set(f"{client[0]}:{client[1]}" if client else "")
        try:
            await self.app(scope, receive, send)
        finally:
            _client.reset(token)
