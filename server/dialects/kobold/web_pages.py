"""The pages a web search found, read for the text around each result's snippet
(server/dialects/kobold/websearch.py), as KoboldCpp's `--websearch` does.

A server that fetches URLs it is handed can be made to reach what only it can reach: the
machine itself, its private network, a cloud's metadata service. The URLs here come from a
search engine's results, which anyone can steer with a page of their own. So every hop of a
fetch (the URL, then each redirect, at most three: server/dialects/media/pinned_fetch.py) must be
http or https and every
address its host resolves to public (`is_public_address`, the check remote images use); the
connection goes to the address checked, not to the name again (a name that resolves to a
public address once and to 127.0.0.1 a moment later gains nothing). A fetch takes at most
PAGE_SECONDS, reads at most MAX_PAGE_BYTES, and only an HTML or text page; whatever fails
gives no text, and the result keeps its snippet.

`address_allowed` is the check: tests give one that lets their loopback server through.
"""

from __future__ import annotations

import asyncio
import re
from html.parser import HTMLParser

import httpx

from server.dialects.media.pinned_fetch import (
    AddressCheck,
    FetchRefused,
    fetch_pinned,
    pinned_client,
)

PAGE_SECONDS = 10.0  # per page, redirects and all
MAX_PAGE_BYTES = 2 * 1024 * 1024  # read of one page; the rest is not waited for
_TEXT_TYPES = ("text/html", "text/plain", "application/xhtml+xml")
_SKIPPED_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "head"})


async def page_texts(urls: list[str], address_allowed: AddressCheck) -> list[str]:
    """Each page's visible text ("" for one not read), fetched concurrently."""
    async with _client() as client:
        return list(await asyncio.gather(*(_text(client, url, address_allowed) for url in urls)))


async def _text(client: httpx.AsyncClient, url: str, address_allowed: AddressCheck) -> str:
    try:
        async with asyncio.timeout(PAGE_SECONDS):
            body, mime = await _fetch(client, url, address_allowed)
    except (TimeoutError, FetchRefused, httpx.HTTPError):
        return ""
    text = body.decode("utf-8", "replace")
    return visible_text(text) if "html" in mime else " ".join(text.split())


def _client() -> httpx.AsyncClient:
    agent = "Mozilla/5.0 (compatible; Hearth web search)"
    return pinned_client(PAGE_SECONDS, {"User-Agent": agent})


async def _fetch(
    client: httpx.AsyncClient, text: str, address_allowed: AddressCheck
) -> tuple[bytes, str]:
    return await fetch_pinned(client, text, _body, address_allowed)


async def _body(response: httpx.Response) -> tuple[bytes, str]:
    if not response.is_success:
        raise FetchRefused(f"answered {response.status_code}")
    mime = response.headers.get("Content-Type", "").partition(";")[0].strip().lower()
    if mime and mime not in _TEXT_TYPES:
        raise FetchRefused(f"{mime}, not a page")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= MAX_PAGE_BYTES:
            del body[MAX_PAGE_BYTES:]  # the start of a long page is enough
            break
    return bytes(body), mime or "text/html"


class _VisibleText(HTMLParser):
    """The text a reader sees: no scripts, styles or head."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_TAGS:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_TAGS and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden and data.strip():
            self.parts.append(data.strip())


def visible_text(html: str) -> str:
    """An HTML page's visible text on one line, spaces collapsed."""
    parser = _VisibleText()
    try:
        parser.feed(html)
        parser.close()
    except AssertionError:  # html.parser's reaction to some broken markup
        pass
    return _tidy(" ".join(parser.parts))


def _tidy(text: str) -> str:
    return re.sub(r"\s+([.,!?;:])", r"\1", " ".join(text.split()))
