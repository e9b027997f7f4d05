"""Fetching a URL that someone else named, without reaching what only this server can reach.

Remote images (remote_media.py: a client names them) and web search pages (kobold/web_pages.py:
a search engine, which anyone can steer with a page of their own, names them) both fetch such
URLs. A server that fetches whatever it is handed can be made to reach the machine itself, its
private network or a cloud's metadata service. So every hop (the URL, then each redirect, at
most MAX_REDIRECTS, followed here rather than by httpx) must be http or https, pass the
caller's host rule, and resolve only to addresses the caller's check allows.

DNS rebinding: a name can resolve to a public address when checked and to 127.0.0.1 when the
connection resolves it again a moment later. So it is resolved once, here, every address
checked, and the request goes to one of those addresses, not to the name; the name still
travels in the Host header and, for https, as the TLS server name, which the certificate is
verified against. `pinned_client` is the client that allows.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx

MAX_REDIRECTS = 3
_DEFAULT_PORTS = {"http": 80, "https": 443}
T = TypeVar("T")
AddressCheck = Callable[[str], bool]  # an address → whether it may be connected to
HostRule = Callable[[str], str | None]  # a host name → why it may not be fetched, or None


def pinned_client(seconds: float, headers: dict[str, str]) -> httpx.AsyncClient:
    """The client `fetch_pinned` needs: no redirects followed by httpx (each hop is checked
    here), no proxy from the environment (the address checked must be the one connected to),
    and no connection kept for another request (each is opened to an address just checked)."""
    return httpx.AsyncClient(
        follow_redirects=False,
        trust_env=False,
        timeout=httpx.Timeout(seconds),
        limits=httpx.Limits(max_keepalive_connections=0),
        headers=headers,
    )


class FetchRefused(Exception):
    """A fetch broke a rule: the reason, in words a client or the console can be told."""


def any_host(_host: str) -> str | None:
    return None


async def fetch_pinned(
    client: httpx.AsyncClient,
    text: str,
    read: Callable[[httpx.Response], Awaitable[T]],
    address_allowed: AddressCheck,
    host_refused: HostRule = any_host,
) -> T:
    """What `read` makes of the answer at `text`, redirects followed by hand, each hop's URL
    and addresses checked before it is fetched."""
    url = httpx.URL(text)
    for _hop in range(MAX_REDIRECTS + 1):
        request = await _checked_request(client, url, address_allowed, host_refused)
        response = await client.send(request, stream=True)
        try:
            if not response.has_redirect_location:
                return await read(response)
            url = url.join(response.headers["Location"])
        finally:
            await response.aclose()
    raise FetchRefused(f"more than {MAX_REDIRECTS} redirects")


async def _checked_request(
    client: httpx.AsyncClient, url: httpx.URL, address_allowed: AddressCheck, host_refused: HostRule
) -> httpx.Request:
    """A GET for `url` once its scheme, host and addresses pass, sent to the address checked."""
    if url.scheme not in _DEFAULT_PORTS:
        raise FetchRefused(f"{url.scheme}: URLs are not fetched (http or https only)")
    host = url.host
    if not host:
        raise FetchRefused("the URL names no host")
    if (refusal := host_refused(host)) is not None:
        raise FetchRefused(refusal)
    addresses = await resolve(url.raw_host.decode("ascii"), url.port or _DEFAULT_PORTS[url.scheme])
    private = [address for address in addresses if not address_allowed(address)]
    if private:
        raise FetchRefused(f"the host {host} has a private address ({private[0]})")
    extensions = {"sni_hostname": url.raw_host.decode("ascii")} if url.scheme == "https" else {}
    return client.build_request(
        "GET",
        url.copy_with(host=addresses[0]),
        headers={"Host": url.netloc.decode("ascii")},
        extensions=extensions,
    )


async def resolve(host: str, port: int) -> list[str]:
    """Every address of `host`, once (tests replace this to answer a name of their own)."""
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:  # socket.gaierror: no such name
        raise FetchRefused(
            f"the host {host} could not be resolved ({exc.strerror or exc})"
        ) from None
    addresses = list(dict.fromkeys(str(entry[4][0]) for entry in found))
    if not addresses:
        raise FetchRefused(f"the host {host} has no address")
    return addresses
