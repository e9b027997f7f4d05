"""Remote image URLs (--remoteimages, server/dialects/media/remote_media.py), fetched from a real
local HTTP server the test runs: off by default (nothing fetched), an allowed host's image
put in the body as a data: URI, and every rule of a fetch a 400 in the dialect's shape naming
the item (host not allowed, a private address first or after a redirect, too many redirects,
too large, not an image, too slow). The test server is on 127.0.0.1, a private address, so
most tests treat that one address as public (`is_public_address` replaced); the refusal of
private addresses is tested with the real check.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from server.dialects.anthropic.schemas import AnthropicMessagesRequest
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.media import pinned_fetch, remote_media
from server.dialects.media.media import (
    REMOTE_URL_MESSAGE,
    media_from_url,
)
from server.dialects.media.remote_media import (
    fetch_remote_images,
    host_allowed,
    is_public_address,
    remote_images,
)
from server.dialects.openai.requests import OpenAIChatRequest, ResponsesRequest
from server.settings.config import HearthSettings
from tests.support import media_bytes as mb
from tests.support.error_shapes import shape_problem
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

PNG = mb.png_bytes(3, 2)
PNG_URI = f"data:image/png;base64,{base64.b64encode(PNG).decode('ascii')}"
LARGE = 4096  # the bytes /big and /big-stream send
OPENAI, ANTHROPIC = Dialect.OPENAI, Dialect.ANTHROPIC


@dataclass
class ImageHost:
    """The test's web server: `/cat.png`; `/page.html` (the PNG's bytes called text/html);
    `/hop/N` (N redirects, then the image); `/to?u=URL` (a redirect to URL); `/big` and
    `/big-stream` (LARGE bytes, with and without Content-Length); `/hang` (no answer until
    `release` is set); anything else a 404. `paths` records each request, `hosts` its Host
    header."""

    url: str = ""
    paths: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _answer(host: ImageHost, handler: BaseHTTPRequestHandler) -> None:
    host.paths.append(handler.path)
    host.hosts.append(handler.headers.get("Host", ""))
    path, _, query = handler.path.partition("?")
    if path.startswith("/hop/") and int(path[5:]) > 0:
        return _redirect(handler, f"/hop/{int(path[5:]) - 1}")
    if path == "/to":
        return _redirect(handler, urllib.parse.parse_qs(query)["u"][0])
    if path == "/hang":
        host.release.wait()
        handler.close_connection = True
        return None
    kinds = {"/cat.png": "image/png", "/page.html": "text/html", "/big": "image/png"}
    kinds |= {"/big-stream": "image/png; charset=binary"}
    if path.startswith("/hop/"):
        path = "/cat.png"
    if path not in kinds:
        handler.send_error(404)
        return None
    body = PNG if path in ("/cat.png", "/page.html") else PNG + b"\0" * (LARGE - len(PNG))
    handler.send_response(200)
    handler.send_header("Content-Type", kinds[path])
    if path == "/big-stream":  # no length: read until the connection closes
        handler.send_header("Connection", "close")
        handler.close_connection = True
    else:
        handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
    return None


def _redirect(handler: BaseHTTPRequestHandler, location: str) -> None:
    handler.send_response(302)
    handler.send_header("Location", location)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


@pytest.fixture
def image_host() -> Iterator[ImageHost]:
    host = ImageHost()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: Any) -> None:
            pass

        def do_GET(self) -> None:
            _answer(host, self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    host.url = f"http://127.0.0.1:{server.server_address[1]}"
    # A short poll, so that shutdown() (which waits for one) does not add half a second.
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield host
    host.release.set()  # a /hang handler ends
    server.shutdown()
    server.server_close()


@pytest.fixture
def loopback_is_public(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test server's address passes the public-address check; every other address is
    judged by the real one."""
    real = remote_media.is_public_address
    monkeypatch.setattr(
        remote_media, "is_public_address", lambda address: address == "127.0.0.1" or real(address)
    )


def chat_body(*urls: str) -> OpenAIChatRequest:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What is this?"}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return OpenAIChatRequest.model_validate({"messages": [{"role": "user", "content": parts}]})


def fetched(body: BaseModel, allowed: list[str] | None, dialect: Dialect = OPENAI) -> None:
    asyncio.run(fetch_remote_images(body, allowed, dialect))


def refusal(call: Callable[[], object], dialect: Dialect = OPENAI) -> str:
    with pytest.raises(APIError) as caught:
        call()
    assert caught.value.status == 400
    assert shape_problem(dialect.value, caught.value.body) is None
    return caught.value.message


def chat_refusal(host: ImageHost, path: str, allowed: list[str]) -> str:
    message = refusal(lambda: fetched(chat_body(host.url + path), allowed))
    prefix = f"messages[0].content[1]: the image at {host.url + path!r} was not fetched: "
    assert message.startswith(prefix), message
    return message[len(prefix) :]


def test_without_the_setting_nothing_is_fetched_and_the_adapter_refuses(
    image_host: ImageHost,
) -> None:
    body = chat_body(f"{image_host.url}/cat.png")
    before = body.model_dump()
    fetched(body, None)
    fetched(body, [])
    assert body.model_dump() == before
    part = body.messages[0].content[1]  # type: ignore[index]
    message = refusal(lambda: media_from_url(part.image_url["url"], OPENAI, where="p"))
    assert message == f"p: {REMOTE_URL_MESSAGE}" and "--remoteimages HOST" in message
    assert image_host.paths == []


@pytest.mark.usefixtures("loopback_is_public")
def test_an_allowed_host_s_images_become_data_uris_in_every_wire(image_host: ImageHost) -> None:
    url = f"{image_host.url}/cat.png"
    chat = OpenAIChatRequest.model_validate(
        {
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]},
                {"role": "user", "content": [{"type": "image_url", "image_url": url}]},
            ]
        }
    )
    fetched(chat, ["127.0.0.1"])
    assert [m.content[0].image_url for m in chat.messages] == [{"url": PNG_URI}, PNG_URI]  # type: ignore[index]
    responses = ResponsesRequest.model_validate(
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}]}
    )
    fetched(responses, ["*"])
    assert responses.input[0].content[0].image_url == PNG_URI  # type: ignore[index, union-attr]
    image = {"type": "image", "source": {"type": "url", "url": url}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [image]}
    anthropic = AnthropicMessagesRequest.model_validate(
        {"max_tokens": 5, "messages": [{"role": "user", "content": [image, result]}]}
    )
    fetched(anthropic, ["127.0.0.1"], ANTHROPIC)
    blocks = anthropic.messages[0].content
    sources = [blocks[0].source, blocks[1].content[0].source]  # type: ignore[index, union-attr]
    assert sources == [{"type": "url", "url": PNG_URI}] * 2
    assert image_host.paths == ["/cat.png"] * 5
    # What media.py makes of the fetched data: the image, checked as any other.
    item = media_from_url(PNG_URI, OPENAI)
    assert (item.kind, item.data, item.width, item.height) == ("image", PNG, 3, 2)


def test_bodies_without_remote_urls_are_left_alone(image_host: ImageHost) -> None:
    body = OpenAIChatRequest.model_validate(
        {
            "messages": [
                {"role": "system", "content": "Be brief. http://example.com/a.png"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "https://example.com/b.png"},
                        {"type": "image_url", "image_url": {"url": PNG_URI}},
                    ],
                },
            ]
        }
    )
    before = body.model_dump()
    assert remote_images(body) == []
    fetched(body, ["*"])
    assert body.model_dump() == before
    assert image_host.paths == []


def test_hosts_outside_the_list_are_refused_unfetched(image_host: ImageHost) -> None:
    reason = chat_refusal(image_host, "/cat.png", ["images.example.com", "*.127.0.0.1"])
    assert reason == "the host 127.0.0.1 is not in the server's --remoteimages list"
    assert image_host.paths == []
    patterns = ["cdn.example.com", "*.images.example.org"]
    assert host_allowed("CDN.example.com.", patterns)
    assert host_allowed("a.b.images.example.org", patterns)
    assert not host_allowed("images.example.org", patterns)  # *.x: names under x only
    assert not host_allowed("evilimages.example.org", patterns)
    assert not host_allowed("example.com", patterns)
    assert host_allowed("anything.example", ["*"])


def test_private_addresses_are_refused_by_the_real_check(image_host: ImageHost) -> None:
    reason = chat_refusal(image_host, "/cat.png", ["127.0.0.1"])
    assert reason == "the host 127.0.0.1 has a private address (127.0.0.1)"
    url = image_host.url.replace("127.0.0.1", "localhost") + "/cat.png"
    message = refusal(lambda: fetched(chat_body(url), ["localhost"]))
    assert "the host localhost has a private address" in message
    assert image_host.paths == []
    for address in ("127.0.0.1", "10.1.2.3", "192.168.1.1", "172.16.0.1", "169.254.169.254"):
        assert not is_public_address(address), address
    for address in ("100.64.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1", "::1", "fe80::1%eth0"):
        assert not is_public_address(address), address
    for address in ("fd00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::"):
        assert not is_public_address(address), address
    for address in ("8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"):
        assert is_public_address(address), address


@pytest.mark.usefixtures("loopback_is_public")
def test_the_address_checked_is_the_one_connected_to(
    image_host: ImageHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name is resolved once, by the check, and the request sent to that address: a second
    resolution (the one a DNS-rebinding attacker answers differently) never happens. Here
    the name exists only in the check's answer, yet the image is fetched, the name in its
    Host header."""
    resolved: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr(pinned_fetch, "resolve", resolve)
    port = image_host.url.rsplit(":", 1)[1]
    body = chat_body(f"http://images.invalid:{port}/hop/1")
    fetched(body, ["*.invalid"])
    assert body.messages[0].content[1].image_url == {"url": PNG_URI}  # type: ignore[index, union-attr]
    assert resolved == ["images.invalid"] * 2  # once per hop
    assert image_host.hosts == [f"images.invalid:{port}"] * 2


@pytest.mark.usefixtures("loopback_is_public")
def test_a_redirect_to_a_private_address_or_another_host_is_refused(
    image_host: ImageHost,
) -> None:
    to_private = "/to?u=" + urllib.parse.quote("http://10.0.0.1/cat.png")
    reason = chat_refusal(image_host, to_private, ["*"])
    assert reason == "the host 10.0.0.1 has a private address (10.0.0.1)"
    to_other = "/to?u=" + urllib.parse.quote("https://example.com/cat.png")
    reason = chat_refusal(image_host, to_other, ["127.0.0.1"])
    assert reason == "the host example.com is not in the server's --remoteimages list"
    to_file = "/to?u=" + urllib.parse.quote("file:///etc/passwd")
    reason = chat_refusal(image_host, to_file, ["*"])
    assert reason == "file: URLs are not fetched (http or https only)"
    to_nowhere = "/to?u=" + urllib.parse.quote("http://[::1/")  # a 400 too, not a 500
    assert "location" in chat_refusal(image_host, to_nowhere, ["*"]).lower()
    assert image_host.paths == [to_private, to_other, to_file, to_nowhere]  # redirects only
    message = refusal(lambda: fetched(chat_body("http:///cat.png"), ["*"]))
    assert message.endswith("was not fetched: the URL names no host")
    message = refusal(lambda: fetched(chat_body("http://[::1/cat.png"), ["*"]))
    assert "was not fetched: the URL is not valid (" in message


@pytest.mark.usefixtures("loopback_is_public")
def test_at_most_three_redirects_are_followed(image_host: ImageHost) -> None:
    body = chat_body(f"{image_host.url}/hop/3")
    fetched(body, ["127.0.0.1"])
    assert body.messages[0].content[1].image_url == {"url": PNG_URI}  # type: ignore[index, union-attr]
    image_host.paths.clear()
    assert chat_refusal(image_host, "/hop/4", ["127.0.0.1"]) == "more than 3 redirects"
    assert image_host.paths == ["/hop/4", "/hop/3", "/hop/2", "/hop/1"]


@pytest.mark.usefixtures("loopback_is_public")
def test_too_large_answers_are_cut_off_at_the_limit(
    image_host: ImageHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_media, "MAX_FETCH_BYTES", LARGE - 1)
    declared = chat_refusal(image_host, "/big", ["127.0.0.1"])
    assert declared == f"it is {LARGE:,} bytes; at most {LARGE - 1:,} are taken"
    streamed = chat_refusal(image_host, "/big-stream", ["127.0.0.1"])
    assert streamed == f"it is more than {LARGE - 1:,} bytes; at most {LARGE - 1:,} are taken"
    monkeypatch.setattr(remote_media, "MAX_FETCH_BYTES", LARGE)  # exactly the limit passes
    body = chat_body(f"{image_host.url}/big-stream")
    fetched(body, ["127.0.0.1"])
    uri = body.messages[0].content[1].image_url["url"]  # type: ignore[index, union-attr]
    assert uri.startswith("data:image/png;base64,") and len(base64.b64decode(uri[22:])) == LARGE


@pytest.mark.usefixtures("loopback_is_public")
def test_answers_that_are_not_images_or_not_found_are_refused(image_host: ImageHost) -> None:
    # The bytes are a PNG, but the server calls them a web page: it is not fetched as one.
    reason = chat_refusal(image_host, "/page.html", ["127.0.0.1"])
    assert reason == "it is text/html, not an image"
    assert chat_refusal(image_host, "/gone.png", ["127.0.0.1"]) == (
        "the server answered 404 Not Found"
    )


@pytest.mark.usefixtures("loopback_is_public")
def test_a_server_that_never_answers_times_out(
    image_host: ImageHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_media, "FETCH_SECONDS", 0.2)
    assert chat_refusal(image_host, "/hang", ["127.0.0.1"]) == "no whole answer within 0.2 s"
    assert image_host.paths == ["/hang"]


@pytest.mark.usefixtures("loopback_is_public")
def test_one_failed_fetch_refuses_the_request_in_its_dialect_s_shape(
    image_host: ImageHost,
) -> None:
    good, bad = f"{image_host.url}/cat.png", f"{image_host.url}/page.html"
    image = {"type": "image", "source": {"type": "url", "url": good}}
    bad_image = {"type": "image", "source": {"type": "url", "url": bad}}
    body = AnthropicMessagesRequest.model_validate(
        {"max_tokens": 5, "messages": [{"role": "user", "content": [image, bad_image]}]}
    )
    message = refusal(lambda: fetched(body, ["127.0.0.1"], ANTHROPIC), ANTHROPIC)
    assert message.startswith(f"messages[0].content[1]: the image at {bad!r} was not fetched")
    # More images than a request takes: refused before any is fetched.
    image_host.paths.clear()
    many = chat_body(*[good] * 9)
    assert "at most 8 images" in refusal(lambda: fetched(many, ["127.0.0.1"]))
    assert image_host.paths == []


def _ask(server: RunningServer, url: str, route: str = "/v1/chat/completions") -> httpx.Response:
    content = [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": url}]
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 2}
    return httpx.post(f"{server.base_url}{route}", json=body, timeout=30)


@pytest.mark.usefixtures("loopback_is_public")
def test_an_allowed_image_reaches_the_engine_through_the_server(
    image_host: ImageHost, serve_engine: Callable[..., RunningServer]
) -> None:
    engine = ScriptedEngine(modalities=frozenset({"vision"}))
    settings = HearthSettings(remoteimages=["127.0.0.1"])
    server = serve_engine(engine, settings)
    answer = _ask(server, f"{image_host.url}/cat.png")
    assert answer.status_code == 200, answer.text
    (item,) = engine.requests[-1].media
    assert (item.kind, item.data, item.mime, item.width, item.height) == (
        "image",
        PNG,
        "image/png",
        3,
        2,
    )
    counted = _ask(server, f"{image_host.url}/cat.png", "/v1/chat/completions/input_tokens")
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    assert image_host.paths == ["/cat.png", "/cat.png"]
    refused = _ask(server, f"{image_host.url}/page.html")
    assert refused.status_code == 400
    assert "not an image" in refused.json()["error"]["message"]


def test_the_server_fetches_nothing_by_default(
    image_host: ImageHost, serve_engine: Callable[..., RunningServer]
) -> None:
    server = serve_engine(ScriptedEngine(modalities=frozenset({"vision"})))
    answer = _ask(server, f"{image_host.url}/cat.png")
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == f"messages[0].content[1]: {REMOTE_URL_MESSAGE}"
    assert image_host.paths == []
