"""KoboldCpp's `--websearch`: a web search done by the server for KoboldAI Lite, whose page
cannot search the web itself (a browser page may not read another site's answers).

`POST /api/extra/websearch {"q": "..."}` answers KoboldCpp's list of results, each
`{"title", "url", "desc", "content"}`: `desc` is the search engine's snippet and `content`
the text around that snippet on the page itself (up to CONTEXT_BEFORE characters before it
and CONTEXT_AFTER after), or "" when the page could not be read or the snippet is not found
in it. As KoboldCpp: the query loses the characters search engines treat as operators and is
cut to MAX_QUERY_CHARS; MAX_RESULTS results; the last query's answer is kept and given again
for the same query.

The search itself goes through the `ddgs` library (DuckDuckGo and the other engines it
aggregates; maintained, where KoboldCpp scrapes DuckDuckGo's HTML page itself), off the event
loop and bounded by SEARCH_SECONDS. `WebSearch` takes another search function (tests search
a server of their own) and another address check for the pages (server/dialects/kobold/
web_pages.py: public addresses only).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from typing_extensions import TypedDict

from server.dialects.kobold.web_pages import page_texts
from server.dialects.media.pinned_fetch import AddressCheck
from server.dialects.media.remote_media import is_public_address

logger = logging.getLogger("hearth")

MAX_RESULTS = 3  # KoboldCpp's
MAX_QUERY_CHARS = 300  # KoboldCpp's: search engines take no more
SEARCH_SECONDS = 15.0
MAX_TITLE_CHARS = 300
MAX_SNIPPET_CHARS = 1000
CONTEXT_BEFORE = 200  # KoboldCpp's widening of a snippet found in its page
CONTEXT_AFTER = 800
_OPERATORS = re.compile(r'[+\-"\\/*^|<>~`]')  # KoboldCpp's: removed from a query
_ANCHOR_CHARS = 40  # a snippet piece looked for in its page


class WebResult(TypedDict):
    """One result, in KoboldCpp's words."""

    title: str
    url: str
    desc: str  # the search engine's snippet
    content: str  # the page's text around the snippet ("" when not read or not found)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """What a search function finds: a page's title, URL and snippet."""

    title: str
    url: str
    snippet: str


# (query, at most this many results, within this many seconds) → hits; runs in a thread.
SearchFunction = Callable[[str, int, float], list[SearchHit]]


class SearchFailed(Exception):
    """The search engine gave no answer: why, for the client and the console."""


def ddgs_search(query: str, max_results: int, timeout: float) -> list[SearchHit]:
    """The default search: ddgs's text search (imported on first use)."""
    from ddgs import DDGS
    from ddgs.exceptions import DDGSException

    try:
        found = DDGS(timeout=max(1, round(timeout))).text(query, max_results=max_results)
    except DDGSException as exc:
        if "no results" in str(exc).lower():
            return []
        raise
    return [
        SearchHit(str(item.get("title", "")), str(item.get("href", "")), str(item.get("body", "")))
        for item in found or []
    ]


def clean_query(text: str) -> str:
    """The query as KoboldCpp sends it on: no operator characters, one space between words,
    at most MAX_QUERY_CHARS."""
    return " ".join(_OPERATORS.sub("", text).split())[:MAX_QUERY_CHARS]


class WebSearch:
    """The server's web search: a search function, then the pages it found read for context."""

    def __init__(
        self,
        search: SearchFunction = ddgs_search,
        *,
        address_allowed: AddressCheck = is_public_address,
        max_results: int = MAX_RESULTS,
        timeout: float = SEARCH_SECONDS,
    ) -> None:
        self._search = search
        self._address_allowed = address_allowed
        self._max_results = max_results
        self._timeout = timeout
        self._last: tuple[str, list[WebResult]] | None = None

    async def results(self, text: str) -> list[WebResult]:
        """The results for a query ([] for an empty one); SearchFailed when the search
        engine gives no answer."""
        query = clean_query(text)
        if not query:
            return []
        if self._last is not None and self._last[0] == query:
            return self._last[1]
        hits = (await self._hits(query))[: self._max_results]
        texts = await page_texts([hit.url for hit in hits], self._address_allowed)
        results = [_result(hit, page) for hit, page in zip(hits, texts, strict=True)]
        if results:
            self._last = (query, results)
        return results

    async def _hits(self, query: str) -> list[SearchHit]:
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(self._search, query, self._max_results, self._timeout),
                self._timeout,
            )
        except TimeoutError:
            raise SearchFailed(f"no answer from the search within {self._timeout:g} s") from None
        except Exception as exc:  # whatever the library raises: the search failed
            logger.warning("Web search failed: %s: %s", type(exc).__name__, exc)
            raise SearchFailed(f"the search failed ({type(exc).__name__})") from None


def _result(hit: SearchHit, page: str) -> WebResult:
    snippet = " ".join(hit.snippet.split())[:MAX_SNIPPET_CHARS]
    return {
        "title": " ".join(hit.title.split())[:MAX_TITLE_CHARS],
        "url": hit.url,
        "desc": snippet,
        "content": context_around(page, snippet),
    }


def context_around(page: str, snippet: str) -> str:
    """The page's text around where the snippet appears in it ("" when it does not). A
    search engine shortens snippets (with "..." inside), so pieces of it are looked for:
    its start, then its middle, then its end."""
    lowered = page.lower()
    words = snippet.replace("...", " ").replace("…", " ").lower()
    pieces = [part.strip() for part in re.split(r"\s{2,}", words) if len(part.strip()) >= 20]
    for piece in pieces or [words.strip()]:
        for anchor in _anchors(piece):
            at = lowered.find(anchor)
            if at >= 0:
                start = max(0, at - CONTEXT_BEFORE)
                return page[start : at + len(snippet) + CONTEXT_AFTER].strip()
    return ""


def _anchors(piece: str) -> list[str]:
    if len(piece) <= _ANCHOR_CHARS:
        return [piece] if len(piece) >= 20 else []
    middle = (len(piece) - _ANCHOR_CHARS) // 2
    return [piece[:_ANCHOR_CHARS], piece[middle : middle + _ANCHOR_CHARS], piece[-_ANCHOR_CHARS:]]
