"""Remote image URLs, fetched before planning when `--remoteimages` allows their host.

The dialect adapters are synchronous and take data only (server/dialects/media/media.py refuses an
http(s) URL): a fetch inside them would block the event loop. So the route skeletons
(server/dialects/pipeline/routing.py) call `fetch_remote_images` on the parsed body first: each
image URL a client names where an adapter reads one (OpenAI chat's `image_url` parts, Responses'
`input_image` parts, Anthropic's `image` blocks with a `url` source, also inside a
`tool_result`) is fetched and replaced in the body by a `data:<type>;base64,…` URI, which the
adapter then checks as any other image. Without `--remoteimages` (the default) nothing is
fetched and the adapter's refusal stands: a server that fetches whatever URL a client names
can be made to reach the machine's private network (a router's admin page, a cloud's
metadata service).

With it, every hop of a fetch (the URL, then each redirect, at most three:
server/dialects/media/pinned_fetch.py) must be http or https, its host in the list, and every
address the host resolves to public; the whole
fetch takes at most FETCH_SECONDS, its body at most media.py's MAX_IMAGE_BYTES (read as it
streams: a longer one is cut off there), and it must be declared an image (`image/*`).
Whatever breaks a rule is a 400 in the dialect's shape naming the item's place in the body.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from server.dialects.edge.errors import APIError, Dialect, ErrorKind
from server.dialects.media.media import MAX_IMAGE_BYTES, check_media_count
from server.dialects.media.pinned_fetch import FetchRefused, fetch_pinned, pinned_client

FETCH_SECONDS = 10.0  # per image, redirects and all
MAX_REDIRECTS = 3
MAX_FETCH_BYTES = MAX_IMAGE_BYTES
_SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class _Refused(FetchRefused):
    """A fetch broke a rule: the reason, said to the client."""


@dataclass(frozen=True, slots=True)
class RemoteImage:
    """An image URL in a body, where it is ("messages[0].content[1]") and how to put the
    fetched data: URI in its place."""

    url: str
    where: str
    replace: Callable[[str], None]


def is_public_address(address: str) -> bool:
    """Whether an address is one the internet routes to: not loopback, private, link-local,
    multicast, reserved, unspecified or shared (carrier-grade NAT). An IPv4 address written
    as IPv6 (::ffff:127.0.0.1) is judged as the IPv4 one. (Tests replace this function to
    fetch from their own loopback server.)"""
    ip = ipaddress.ip_address(address.partition("%")[0])  # an IPv6 scope ("%eth0") aside
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """`host` against the list: an exact name, `*.example.com` for any name under
    example.com (not example.com itself), `*` for any host."""
    name = host.lower().rstrip(".")
    for pattern in allowed:
        if pattern == "*" or pattern == name:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


def remote_images(body: object) -> list[RemoteImage]:
    """The http(s) image URLs in a parsed body, where an adapter reads images."""
    return image_urls(body, ("http://", "https://"))


def image_urls(body: object, schemes: tuple[str, ...]) -> list[RemoteImage]:
    """The image URLs with one of `schemes` in a parsed body, where an adapter reads images:
    chat messages' content parts (and an Anthropic tool_result's blocks), Responses input
    messages' parts (file:// ones too: server/dialects/media/local_media.py)."""
    found: list[RemoteImage] = []
    messages = getattr(body, "messages", None)
    if isinstance(messages, list):
        for index, message in enumerate(messages):
            content = getattr(message, "content", None)
            found.extend(_in_parts(content, f"messages[{index}]", schemes))
    items = getattr(body, "input", None)
    if isinstance(items, list):
        for index, item in enumerate(items):
            if (getattr(item, "type", None) or "message") == "message":
                content = getattr(item, "content", None)
                found.extend(_in_parts(content, f"input[{index}]", schemes))
    return found


def _in_parts(content: object, where: str, schemes: tuple[str, ...]) -> Iterator[RemoteImage]:
    if not isinstance(content, list):
        return
    for index, part in enumerate(content):
        place = f"{where}.content[{index}]"
        kind = getattr(part, "type", None)
        if kind == "tool_result":
            yield from _in_parts(getattr(part, "content", None), place, schemes)
        elif kind in ("image_url", "input_image"):  # OpenAI: a string, or {"url": ...}
            value = getattr(part, "image_url", None)
            if isinstance(value, dict) and _has_scheme(value.get("url"), schemes):
                yield RemoteImage(value["url"], place, _set_item(value, "url"))
            elif isinstance(value, str) and _has_scheme(value, schemes):
                yield RemoteImage(value, place, _set_attribute(part, "image_url"))
        elif kind == "image":  # Anthropic: {"type": "url", "url": ...}
            source = getattr(part, "source", None) or {}
            is_url = isinstance(source, dict) and source.get("type") == "url"
            if is_url and _has_scheme(source.get("url"), schemes):
                yield RemoteImage(source["url"], place, _set_item(source, "url"))


def _has_scheme(url: object, schemes: tuple[str, ...]) -> bool:
    return isinstance(url, str) and url.strip()[:8].lower().startswith(schemes)


def _set_item(mapping: dict[str, Any], key: str) -> Callable[[str], None]:
    return lambda value: mapping.__setitem__(key, value)


def _set_attribute(target: object, name: str) -> Callable[[str], None]:
    return lambda value: setattr(target, name, value)


async def fetch_remote_images(
    body: object, allowed: Sequence[str] | None, dialect: Dialect
) -> None:
    """Replace each remote image URL in `body` by the data: URI of what it names, fetched
    concurrently, when `allowed` (--remoteimages) is given; otherwise leave the body alone,
    for the adapter to refuse its URLs. A 400 for the first fetch that fails."""
    if not allowed:
        return
    found = remote_images(body)
    if not found:
        return
    # The per-request cap before anything is fetched; it also bounds the fetches at once.
    check_media_count(found, dialect)
    async with _client() as client:
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(_fetch(client, item, allowed)) for item in found]
        except BaseExceptionGroup as failed:  # the others were cancelled: the first one says
            first = failed.exceptions[0]
            if isinstance(first, _Refused):
                raise APIError(400, str(first), ErrorKind.BAD_INPUT, dialect) from None
            raise first from None
    for item, task in zip(found, tasks, strict=True):
        item.replace(task.result())


def _client() -> httpx.AsyncClient:
    return pinned_client(FETCH_SECONDS, {"User-Agent": "Hearth", "Accept": "image/*"})


async def _fetch(client: httpx.AsyncClient, item: RemoteImage, allowed: Sequence[str]) -> str:
    """The image at `item.url` as a data: URI; a refusal names the item."""
    try:
        async with asyncio.timeout(FETCH_SECONDS):
            return await _fetch_url(client, item.url.strip(), allowed)
    except TimeoutError:
        reason = f"no whole answer within {FETCH_SECONDS:g} s"
    except FetchRefused as exc:
        reason = str(exc)
    except httpx.InvalidURL as exc:  # the URL, or a redirect's Location
        reason = f"the URL is not valid ({exc})"
    except httpx.HTTPError as exc:  # a connection refused or broken, a TLS failure
        reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
    raise _Refused(f"{item.where}: the image at {_shown(item.url)} was not fetched: {reason}")


async def _fetch_url(client: httpx.AsyncClient, text: str, allowed: Sequence[str]) -> str:
    """The image's data: URI; every hop's host in the list, every address public."""

    def host_refused(host: str) -> str | None:
        if host_allowed(host, allowed):
            return None
        return f"the host {host} is not in the server's --remoteimages list"

    return await fetch_pinned(client, text, _data_uri, is_public_address, host_refused)


async def _data_uri(response: httpx.Response) -> str:
    """The answer's body as a data: URI, when it is a success declared as an image and no
    longer than the limit (the declared length first, then the bytes as they come)."""
    if not response.is_success:
        raise _Refused(f"the server answered {response.status_code} {response.reason_phrase}")
    mime = response.headers.get("Content-Type", "").partition(";")[0].strip().lower()
    if not mime.startswith("image/"):
        raise _Refused(f"it is {mime or 'of no declared type'}, not an image")
    limit = MAX_FETCH_BYTES
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _Refused(_too_large(int(declared), limit))
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise _Refused(_too_large(len(body), limit, more=True))
    return f"data:{mime};base64,{base64.b64encode(body).decode('ascii')}"


def _too_large(size: int, limit: int, *, more: bool = False) -> str:
    size_text = f"more than {limit:,}" if more else f"{size:,}"
    return f"it is {size_text} bytes; at most {limit:,} are taken"


def _shown(url: str) -> str:
    return repr(url[:60] + ("…" if len(url) > 60 else ""))
