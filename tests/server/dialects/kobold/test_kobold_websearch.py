"""KoboldCpp's `--websearch` (server/dialects/kobold/websearch.py, web_pages.py), never on the
internet: the search function asks a stand-in search server the test starts on 127.0.0.1,
whose results point at pages it serves too. Those pages are read only when the test lets
loopback addresses through; with the server's own check (public addresses only) no page of
this machine or its network is ever requested, redirects included."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from server.dialects.kobold import websearch as websearch_module
from server.dialects.kobold.lite import lite_features
from server.dialects.kobold.web_pages import MAX_PAGE_BYTES, visible_text
from server.dialects.kobold.websearch import (
    CONTEXT_AFTER,
    CONTEXT_BEFORE,
    SearchHit,
    WebSearch,
    clean_query,
    context_around,
    ddgs_search,
)
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
WEBSEARCH = "/api/extra/websearch"
SNIPPET = "Kobolds are small reptilian creatures who live in warrens under the mountains"
FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 40


@dataclass
class StandIn:
    """The stand-in search server: what it was asked, and its base URL."""

    base_url: str
    private_url: str  # a page on 127.0.0.2: "private" even when 127.0.0.1 is let through
    requests: list[str] = field(default_factory=list)

    def pages_asked(self) -> list[str]:
        return [path for path in self.requests if not path.startswith("/search")]


def _handler(stand_in: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            stand_in.requests.append(self.path)
            url = urlparse(self.path)
            if url.path == "/search":
                self._send(200, "application/json", json.dumps(_results(stand_in, url.query)))
            elif url.path == "/page/kobolds":
                page = "<html><head><title>t</title><script>var hidden = 1;</script></head>"
                page += f"<body><p>{FILLER}</p><p>{SNIPPET}, and they dig.</p><p>{FILLER}</p>"
                self._send(200, "text/html; charset=utf-8", page + "</body></html>")
            elif url.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", "/page/kobolds")
                self.end_headers()
            elif url.path == "/redirect-private":
                self.send_response(302)
                self.send_header("Location", stand_in.private_url)
                self.end_headers()
            elif url.path == "/image":
                self._send(200, "image/png", "not a page")
            elif url.path == "/huge":
                self._send(200, "text/plain", "start " + "y" * (MAX_PAGE_BYTES * 2))
            else:
                self._send(404, "text/plain", "no")

        def _send(self, status: int, kind: str, text: str) -> None:
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _results(stand_in: StandIn, query: str) -> list[dict[str, str]]:
    """Five results: more than the server keeps."""
    asked = parse_qs(query).get("q", [""])[0]
    base = stand_in.base_url
    hits = [
        (f"Kobolds ({asked})", f"{base}/page/kobolds", SNIPPET),
        ("Moved", f"{base}/redirect", f"...{SNIPPET[10:60]}..."),
        ("Secret", stand_in.private_url, "a private page"),
        ("Fourth", f"{base}/image", "four"),
        ("Fifth", f"{base}/page/kobolds", "five"),
    ]
    return [{"title": title, "url": url, "snippet": text} for title, url, text in hits]


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    public = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    private = ThreadingHTTPServer(("127.0.0.2", 0), BaseHTTPRequestHandler)
    found = StandIn(
        f"http://127.0.0.1:{public.server_address[1]}",
        f"http://127.0.0.2:{private.server_address[1]}/page/secret",
    )
    public.RequestHandlerClass = private.RequestHandlerClass = _handler(found)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (public, private)]
    for thread in threads:
        thread.start()
    yield found
    for server in (public, private):
        server.shutdown()
        server.server_close()


def search_through(stand_in: StandIn) -> Callable[[str, int, float], list[SearchHit]]:
    def search(query: str, max_results: int, timeout: float) -> list[SearchHit]:
        answer = httpx.get(f"{stand_in.base_url}/search", params={"q": query}, timeout=timeout)
        return [SearchHit(**hit) for hit in answer.json()]

    return search


def loopback_only(address: str) -> bool:
    """The test's address check: 127.0.0.1 (the stand-in) is let through, nothing else."""
    return address == "127.0.0.1"


def serve_search(serve_engine: Serve, search: WebSearch, **settings: Any) -> RunningServer:
    chosen = HearthSettings(websearch=True, **settings)
    return serve_engine(ScriptedEngine(), chosen, lite=lite_features(chosen, search))


def test_results_come_with_the_text_around_them_on_their_pages(
    serve_engine: Serve, stand_in: StandIn
) -> None:
    search = WebSearch(search_through(stand_in), address_allowed=loopback_only)
    server = serve_search(serve_engine, search)
    with server.client() as client:
        answer = client.post(WEBSEARCH, json={"q": 'kobold "warrens" +mountains'})
    assert answer.status_code == 200
    results = answer.json()
    assert len(results) == 3  # KoboldCpp's count, of the stand-in's five
    assert [set(result) for result in results] == [{"title", "url", "desc", "content"}] * 3
    first, moved, secret = results
    # the query reached the search without the characters engines read as operators
    assert first["title"] == "Kobolds (kobold warrens mountains)"
    assert first["desc"] == SNIPPET
    content = first["content"]
    assert SNIPPET in content and "var hidden" not in content
    assert 0 < content.index(SNIPPET) <= CONTEXT_BEFORE  # some of the page before it too
    assert len(content) <= CONTEXT_BEFORE + len(SNIPPET) + CONTEXT_AFTER
    assert SNIPPET in moved["content"]  # a redirect to a page let through is followed
    assert secret["content"] == ""  # 127.0.0.2 is not let through
    assert "/page/secret" not in stand_in.pages_asked()


def test_pages_on_private_addresses_are_never_read(serve_engine: Serve, stand_in: StandIn) -> None:
    server = serve_search(serve_engine, WebSearch(search_through(stand_in)))  # the real check
    with server.client() as client:
        results = client.post(WEBSEARCH, json={"q": "kobolds"}).json()
    assert [result["title"] for result in results] == ["Kobolds (kobolds)", "Moved", "Secret"]
    assert all(result["content"] == "" for result in results)
    assert results[0]["desc"] == SNIPPET  # the snippet is still there
    assert stand_in.pages_asked() == []  # only the search itself was asked


def test_a_redirect_to_a_private_address_is_not_followed(stand_in: StandIn) -> None:
    def one_hit(query: str, max_results: int, timeout: float) -> list[SearchHit]:
        return [SearchHit("Away", f"{stand_in.base_url}/redirect-private", "a private page")]

    search = WebSearch(one_hit, address_allowed=loopback_only)
    results = asyncio.run(search.results("anything"))
    assert results[0]["content"] == ""
    assert "/redirect-private" in stand_in.pages_asked()  # the first hop was public enough
    assert "/page/secret" not in stand_in.pages_asked()


def test_pages_are_bounded_and_only_pages(stand_in: StandIn) -> None:
    def hits(query: str, max_results: int, timeout: float) -> list[SearchHit]:
        return [
            SearchHit("Image", f"{stand_in.base_url}/image", "not a page at all, an image"),
            SearchHit("Huge", f"{stand_in.base_url}/huge", "start " + "y" * 30),
        ]

    search = WebSearch(hits, address_allowed=loopback_only)
    image, huge = asyncio.run(search.results("bounded"))
    assert image["content"] == ""  # image/png is not read
    assert huge["content"].startswith("start yyyy")
    assert len(huge["content"]) <= CONTEXT_BEFORE + len(huge["desc"]) + CONTEXT_AFTER


def test_the_same_query_is_answered_again_without_searching(
    serve_engine: Serve, stand_in: StandIn
) -> None:
    search = WebSearch(search_through(stand_in), address_allowed=loopback_only)
    server = serve_search(serve_engine, search)
    with server.client() as client:
        first = client.post(WEBSEARCH, json={"q": "kobolds"}).json()
        asked = len(stand_in.requests)
        assert client.post(WEBSEARCH, json={"q": "  kobolds "}).json() == first
        assert len(stand_in.requests) == asked
        assert client.post(WEBSEARCH, json={"q": '"" ++'}).json() == []  # nothing left to ask


def test_a_failed_or_slow_search_is_a_502(serve_engine: Serve) -> None:
    def broken(query: str, max_results: int, timeout: float) -> list[SearchHit]:
        raise ConnectionError("no network")

    def slow(query: str, max_results: int, timeout: float) -> list[SearchHit]:
        time.sleep(2)
        return []

    for search, reason in (
        (WebSearch(broken), "ConnectionError"),
        (WebSearch(slow, timeout=0.2), "0.2 s"),
    ):
        with serve_search(serve_engine, search).client() as client:
            answer = client.post(WEBSEARCH, json={"q": "kobolds"})
        assert answer.status_code == 502
        assert answer.json()["detail"]["msg"].startswith("The web search failed")
        assert reason in answer.json()["detail"]["msg"]


def test_websearch_off_answers_an_empty_list(serve_engine: Serve) -> None:
    with serve_engine(ScriptedEngine(), HearthSettings()).client() as client:
        answer = client.post(WEBSEARCH, json={"q": "kobolds"})
    assert answer.status_code == 400
    assert answer.json()["detail"]["msg"] == "WebSearch not enabled!"


def test_ddgs_results_become_hits(monkeypatch: pytest.MonkeyPatch) -> None:
    import ddgs
    from ddgs.exceptions import DDGSException

    asked: list[tuple[str, int, int | None]] = []

    class FakeDDGS:
        def __init__(self, timeout: int | None = 5) -> None:
            self.timeout = timeout

        def text(self, query: str, max_results: int | None = None) -> list[dict[str, str]]:
            asked.append((query, max_results or 0, self.timeout))
            if query == "nothing":
                raise DDGSException("No results found.")
            return [{"title": "T", "href": "https://example.org/", "body": "B"}]

    monkeypatch.setattr(ddgs, "DDGS", FakeDDGS)
    assert ddgs_search("kobolds", 3, 15.0) == [SearchHit("T", "https://example.org/", "B")]
    assert asked == [("kobolds", 3, 15)]
    assert ddgs_search("nothing", 3, 15.0) == []
    assert websearch_module.WebSearch()._search is ddgs_search  # the default


def test_queries_are_cleaned_as_koboldcpp_does() -> None:
    assert clean_query('  what  is "a" kobold?  ') == "what is a kobold?"
    assert clean_query("a+b-c/d*e^f|g<h>i~j`k\\l") == "abcdefghijkl"
    assert len(clean_query("word " * 200)) == 300


def test_context_is_found_from_a_shortened_snippet() -> None:
    page = visible_text(f"<p>{FILLER}</p><p>{SNIPPET} and more.</p><p>{FILLER}</p>")
    shortened = f"... {SNIPPET[:45]} ... {SNIPPET[50:]}"
    around = context_around(page, shortened)
    assert SNIPPET in around
    assert context_around(page, "a sentence that is nowhere on that page at all") == ""
