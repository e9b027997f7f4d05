"""Who sent the request being handled, where the request's code cannot see it: the client's
address (for the launcher's live view, the rate limit and the queue's owner), the API key it
presented (held only as a digest) and whose prompt it is (for --privatecache).

`admission.submit` records who asked on each `GenerationRequest` without every route passing
the HTTP request down: a pure ASGI middleware puts a `Caller` in a context variable for the
request's task, which the handler (and any task it starts) reads. A pure ASGI middleware, not
Starlette's `BaseHTTPMiddleware`, so streams are left alone.

Behind a reverse proxy every request comes from the proxy's address. `X-Forwarded-For` then
names the client, but anyone can send that header: it is read only when the TCP peer is one of
--trustedproxies (`app.state.trusted_proxies`, from `trusted_networks`), and then from the
right: each proxy appends the address it was reached from, so the right-most address that is
not itself a trusted proxy is the last one a trusted proxy vouched for. Anything a client wrote
further left is ignored. (uvicorn's own X-Forwarded-For handling, which trusts loopback peers
by default, must be off: server/process/http_server.py.)
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Caller:
    """The client of one request: `address` as the live view shows it (`host:port` for a
    direct peer, the host alone when a trusted proxy named it), `host` its IP address, and
    `key_digest` a digest of the API key it presented ("" when none)."""

    address: str = ""
    host: str = ""
    key_digest: str = ""


_NOBODY = Caller()  # outside a request (frozen, so one shared default is safe)
_caller: ContextVar[Caller] = ContextVar("hearth_caller", default=_NOBODY)


def client_address() -> str:
    """The address of the client of the request being handled ("" outside a request)."""
    return _caller.get().address


def client_host() -> str:
    """The IP address of the client of the request being handled ("" outside a request)."""
    return _caller.get().host


def api_key_digest() -> str:
    """A digest of the API key the request being handled presented (Bearer or x-api-key),
    "" when it presented none. The key itself is never kept."""
    return _caller.get().key_digest


def cache_owner() -> str:
    """Whose prompt the request being handled sends: a digest of the API key it presented,
    else of its host; cached prompts serve only the same owner when the cache is private."""
    caller = _caller.get()
    return caller.key_digest or _digest(b"host:" + caller.host.encode())


def trusted_networks(entries: Iterable[str] | None) -> tuple[Network, ...]:
    """--trustedproxies as networks (a bare address is a network of one). ValueError naming
    the entry that is neither an address nor a CIDR network."""
    networks: list[Network] = []
    for entry in entries or ():
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"--trustedproxies: {entry!r} is not an IP address or a network (CIDR)"
            ) from None
    return tuple(networks)


def forwarded_client(peer: str, forwarded_for: str, trusted: Sequence[Network]) -> str | None:
    """The client a chain of trusted proxies names in `forwarded_for`, for a request whose
    TCP peer is `peer`; None when the header is not to be believed (the peer is not a trusted
    proxy, or the header is empty or malformed where it matters)."""
    if not _is_trusted(_parsed(peer), trusted):
        return None
    hops = [hop.strip() for hop in forwarded_for.split(",")]
    if not any(hops):
        return None
    for hop in reversed(hops):
        address = _parsed(hop)
        if address is None:
            return None  # what a trusted proxy wrote is always an address: misconfigured
        if not _is_trusted(address, trusted):
            return str(address)
    # Every hop is a proxy: the request began on a proxy's own machine.
    return str(_parsed(hops[0]))


def _parsed(text: str) -> Address | None:
    """An address as peers and proxies write it (`1.2.3.4`, `1.2.3.4:80`, `[::1]:80`, `::1`),
    IPv4-mapped IPv6 as IPv4; None when it is none of those."""
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_trusted(address: Address | None, trusted: Sequence[Network]) -> bool:
    return address is not None and any(address in network for network in trusted)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _presented_key(headers: dict[bytes, bytes]) -> bytes:
    scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
    return token.strip() if scheme.lower() == b"bearer" else headers.get(b"x-api-key", b"").strip()


def caller_of(scope: Scope, trusted: Sequence[Network]) -> Caller:
    """Who sent the request of `scope`, X-Forwarded-For believed only from `trusted` peers."""
    headers: dict[bytes, bytes] = {}
    for name, value in scope.get("headers") or ():
        # Several X-Forwarded-For lines are one list, in order.
        headers[name] = headers[name] + b"," + value if name in headers else value
    key = _presented_key(headers)
    key_digest = _digest(b"key:" + key) if key else ""
    peer = scope.get("client")
    if not peer:
        return Caller(key_digest=key_digest)
    forwarded = headers.get(b"x-forwarded-for")
    if forwarded is not None and trusted:
        client = forwarded_client(peer[0], forwarded.decode("latin-1"), trusted)
        if client is not None:
            return Caller(client, client, key_digest)
    return Caller(f"{peer[0]}:{peer[1]}", peer[0], key_digest)


class ClientAddressMiddleware:
    """Sets the `Caller` of each HTTP request, with the app's `state.trusted_proxies`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        app = scope.get("app")
        trusted = getattr(getattr(app, "state", None), "trusted_proxies", ())
        token = _caller.set(caller_of(scope, trusted))
        try:
            await self.app(scope, receive, send)
        finally:
            _caller.reset(token)
