"""Which web pages may call the API from a browser: llama-server's --cors-origins.

- `*` (the default, as before): any page. Preflights are answered as llama-server answers them
  (the origin echoed, credentials allowed, `GET, POST, DELETE, OPTIONS`), and other responses
  to a page carry `Access-Control-Allow-Origin: *`, as KoboldCpp's do.
- `localhost`: only pages of this machine (`http` or `https`, host `localhost`, `127.0.0.1` or
  `[::1]`, any port).
- a comma-separated list of origins (`https://chat.example.org`), which may also hold
  `localhost`: only those.

A preflight from a refused origin is still a 200, without `Access-Control-Allow-Origin` (what
llama.cpp's own tests expect): the browser then refuses the call. A refused origin's other
GETs are served without CORS headers (the page cannot read them); anything else it sends is
refused with a 403 in the path's dialect, because a page may send a form POST without any
preflight, and Hearth reads a body as JSON whatever its content type. The chat page, served
by Hearth itself, is same-origin: a page whose origin names the host the request was sent to
(the Host header) is always let through, whatever the list.

`Access-Control-Allow-Headers`: on llama-server's own paths llama-server's `*`; elsewhere
the headers the preflight asks for, because browsers never let a `*` cover `Authorization`
(KoboldAI Lite in a browser sends the password that way).

A pure ASGI middleware (not Starlette's CORSMiddleware, which answers a refused preflight
with a 400 and cannot say `*` for the headers; not BaseHTTPMiddleware, which would buffer
streams): it adds headers to the response start and never touches the body.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.dialects.edge.errors import LLAMA_SERVER_PATHS, ErrorKind, dialect_for_path, error_body

ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS"
PREFLIGHT_MAX_AGE = "600"
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_local_origin(origin: str) -> bool:
    """An origin of this machine: http(s)://localhost, 127.0.0.1 or [::1], any port."""
    try:
        parts = urlsplit(origin)
        _port = parts.port  # a port that is not a number raises ValueError
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and parts.hostname in LOCAL_HOSTS
        and "@" not in parts.netloc
        and parts.path in ("", "/")
    )


class OriginRule:
    """--cors-origins as a rule: `*`, `localhost` and named origins, any mix of them."""

    def __init__(self, origins: Iterable[str]) -> None:
        entries = [entry.strip().lower().rstrip("/") for entry in origins if entry.strip()]
        self.any = not entries or "*" in entries
        self.local = "localhost" in entries
        self.named = frozenset(entry for entry in entries if entry not in ("*", "localhost"))

    def allows(self, origin: str) -> bool:
        if self.any:
            return True
        wanted = origin.strip().lower().rstrip("/")
        return wanted in self.named or (self.local and is_local_origin(wanted))


def same_origin(origin: str, host_header: str | None) -> bool:
    """The page was served by the host the request went to: its origin's host is the Host
    header's (ports aside, as a proxy in front may not pass the port on)."""
    if not host_header:
        return False
    try:
        page = urlsplit(origin).hostname
        target = urlsplit(f"//{host_header}").hostname
    except ValueError:
        return False
    return page is not None and page == target


class CORSOriginsMiddleware:
    def __init__(self, app: ASGIApp, origins: Iterable[str] = ("*",)) -> None:
        self.app = app
        self.rule = OriginRule(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        allowed = self.rule.allows(origin)
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            response = self._preflight(scope["path"], headers, origin, allowed)
        elif allowed or same_origin(origin, headers.get("host")):
            await self.app(scope, receive, self._sending_headers(send, origin))
            return
        elif scope["method"] in _READ_ONLY_METHODS:
            await self.app(scope, receive, send)  # no CORS headers: the page cannot read it
            return
        else:
            response = _refused(scope["path"], origin)
        await response(scope, receive, send)

    def _preflight(self, path: str, headers: Headers, origin: str, allowed: bool) -> Response:
        if not allowed:
            return _Preflight({"Vary": "Origin"})
        answer = {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Credentials": "true",
            "Access-Control-Allow-Methods": ALLOWED_METHODS,
            "Access-Control-Allow-Headers": _allowed_headers(path, headers),
            "Access-Control-Max-Age": PREFLIGHT_MAX_AGE,
            "Vary": "Origin",
        }
        if headers.get("access-control-request-private-network") == "true":
            # Chrome asks before a public page may call a server on this machine or network.
            answer["Access-Control-Allow-Private-Network"] = "true"
        return _Preflight(answer)

    def _sending_headers(self, send: Send, origin: str) -> Send:
        """`send`, adding the CORS headers of an allowed origin to the response's start."""
        if self.rule.any:
            extra = {"Access-Control-Allow-Origin": "*"}
        else:
            extra = {
                "Access-Control-Allow-Origin": origin,
                "Access-Control-Allow-Credentials": "true",
            }

        vary = not self.rule.any  # the answer depends on the origin

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": _added(message.get("headers", ()), extra, vary)}
            await send(message)

        return send_with_headers


RawHeaders = list[tuple[bytes, bytes]]


def _raw(headers: dict[str, str]) -> RawHeaders:
    # Spelled as llama-server spells them: its tests (and some clients) match names exactly,
    # and Starlette's own responses would send them lowercased.
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


def _added(
    existing: Iterable[tuple[bytes, bytes]], extra: dict[str, str], vary: bool
) -> RawHeaders:
    """A response's headers with `extra` added, and Origin added to its Vary when `vary`."""
    headers = list(existing)
    if vary:
        varies = [index for index, (name, _value) in enumerate(headers) if name.lower() == b"vary"]
        if varies:
            name, value = headers[varies[0]]
            headers[varies[0]] = (name, value + b", Origin")
        else:
            headers.append((b"Vary", b"Origin"))
    return headers + _raw(extra)


class _Preflight(Response):
    """A preflight's empty 200 with its headers spelled as given."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__(status_code=200)
        self.raw_headers = [*_raw(headers), (b"Content-Length", b"0")]


def _allowed_headers(path: str, headers: Headers) -> str:
    asked = headers.get("access-control-request-headers", "").strip()
    if path in LLAMA_SERVER_PATHS or not asked:
        return "*"
    return asked


def _refused(path: str, origin: str) -> Response:
    """A write from a page whose origin --cors-origins does not name, in the path's dialect."""
    message = f"Requests from the web page at {origin} are not allowed (--cors-origins)."
    body = error_body(dialect_for_path(path), message, ErrorKind.BAD_INPUT)
    return JSONResponse(body, status_code=403, headers={"Vary": "Origin"})
