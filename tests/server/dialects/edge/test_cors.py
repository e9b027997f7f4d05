"""--cors-origins over real HTTP with a scripted engine: the default answers preflights as
llama-server does (llama.cpp's unit/test_security.py: test_cors_options) and keeps KoboldCpp's
`Access-Control-Allow-Origin: *`; `localhost` reflects only this machine's pages
(test_cors_origins_localhost_reflects / _rejects); a list only the origins it names. A refused
page gets a 200 preflight without the allow header, its reads without CORS headers and its
writes a 403 in the dialect's shape; the chat page, served from Hearth's own origin, works in
a real browser whatever the list."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from server.settings.config import HearthSettings
from tests.support.chat_page import assistant_text, open_page, reply_done, until
from tests.support.error_shapes import assert_error_shape
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
USER = [{"role": "user", "content": "Hi"}]
LOCAL_ORIGINS = [
    "http://localhost",
    "http://localhost:8080",
    "http://127.0.0.1",
    "http://127.0.0.1:3000",
    "http://[::1]",
    "http://[::1]:3000",
    "https://localhost:8443",
]
FOREIGN_ORIGINS = [
    "http://web.mydomain.fr",
    "http://evil.com",
    "http://notlocalhost",
    "http://localhost.evil.com",
    "http://user@localhost",
    "null",
]
WRITES = {
    "/api/v1/generate": {"prompt": "x", "max_length": 2},
    "/v1/completions": {"prompt": "x", "max_tokens": 2},
    "/v1/messages": {"messages": USER, "max_tokens": 2},
    "/api/generate": {"model": "m", "prompt": "x", "stream": False},
}


def preflight(
    server: RunningServer, origin: str, path: str = "/completions", **extra: str
) -> httpx.Response:
    """A browser's preflight for a POST with an Authorization header (as llama.cpp's tests)."""
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "Authorization",
        **extra,
    }
    return httpx.options(f"{server.base_url}{path}", headers=headers)


def test_the_default_answers_preflights_as_llama_server(serve_engine: Serve) -> None:
    # A password changes nothing: a preflight carries no key.
    server = serve_engine(ScriptedEngine(), HearthSettings(password="secret"))
    for origin in ("localhost", "web.mydomain.fr", "https://anything.example"):
        answer = preflight(server, origin)
        assert answer.status_code == 200
        assert answer.headers["Access-Control-Allow-Origin"] == origin
        assert answer.headers["Access-Control-Allow-Credentials"] == "true"
        assert answer.headers["Access-Control-Allow-Methods"] == "GET, POST, DELETE, OPTIONS"
        assert answer.headers["Access-Control-Allow-Headers"] == "*"
        # Spelled as llama-server spells them: its tests match the names exactly.
        names = {name for name, _value in answer.headers.raw}
        assert {b"Access-Control-Allow-Origin", b"Access-Control-Allow-Credentials"} <= names
    # Elsewhere the headers asked for are named: a `*` never covers Authorization in browsers.
    asked = "authorization, x-api-key, content-type, genkey"
    for path in ("/api/v1/generate", "/v1/chat/completions", "/v1/messages", "/api/chat"):
        answer = httpx.options(
            f"{server.base_url}{path}",
            headers={
                "Origin": "https://lite.koboldai.net",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": asked,
                "Access-Control-Request-Private-Network": "true",
            },
        )
        assert answer.headers["Access-Control-Allow-Headers"] == asked, path
        assert answer.headers["Access-Control-Allow-Private-Network"] == "true"


def test_the_default_lets_any_page_read_every_answer(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    headers = {"Origin": "http://evil.com", "Content-Type": "text/plain"}
    with server.client(headers=headers) as client:
        for path, body in WRITES.items():
            answer = client.post(path, json=body)
            assert answer.status_code == 200, path
            assert answer.headers["Access-Control-Allow-Origin"] == "*"
        assert client.get("/v1/models").headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Origin" not in httpx.get(f"{server.base_url}/v1/models").headers


@pytest.mark.parametrize("origin", LOCAL_ORIGINS)
def test_localhost_reflects_this_machines_pages(serve_engine: Serve, origin: str) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(cors_origins="localhost"))
    answer = preflight(server, origin)
    assert answer.status_code == 200
    assert answer.headers["Access-Control-Allow-Origin"] == origin
    with server.client(headers={"Origin": origin}) as client:
        served = client.post("/v1/completions", json=WRITES["/v1/completions"])
        assert served.status_code == 200
        assert served.headers["Access-Control-Allow-Origin"] == origin
        assert "origin" in served.headers["Vary"].lower()


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
def test_localhost_refuses_other_pages(serve_engine: Serve, origin: str) -> None:
    engine = ScriptedEngine()
    server = serve_engine(engine, HearthSettings(cors_origins="localhost"))
    answer = preflight(server, origin)
    assert answer.status_code == 200
    assert "Access-Control-Allow-Origin" not in answer.headers
    assert not any(name.startswith("access-control-") for name in answer.headers)
    # A form POST needs no preflight: refused here, in the path's dialect, before any work.
    headers = {"Origin": origin, "Content-Type": "text/plain"}
    with server.client(headers=headers) as client:
        for path, body in WRITES.items():
            refused = client.post(path, json=body)
            assert refused.status_code == 403, path
            assert_error_shape(path, refused.json())
            assert "--cors-origins" in refused.text
        read = client.get("/v1/models")  # served, but the page may not read it
        assert read.status_code == 200
        assert "Access-Control-Allow-Origin" not in read.headers
    assert engine.requests == []


def test_a_list_names_exactly_the_pages_it_lets_in(serve_engine: Serve) -> None:
    settings = HearthSettings(cors_origins="https://Chat.Example.org/, http://localhost:3000")
    server = serve_engine(ScriptedEngine(), settings)
    for origin in ("https://chat.example.org", "http://localhost:3000"):
        assert preflight(server, origin).headers["Access-Control-Allow-Origin"] == origin
    for origin in ("http://chat.example.org", "https://chat.example.org:8443", "http://localhost"):
        assert "Access-Control-Allow-Origin" not in preflight(server, origin).headers
    with server.client(headers={"Origin": "https://evil.example"}) as client:
        assert client.post("/api/v1/generate", json=WRITES["/api/v1/generate"]).status_code == 403


def test_a_page_of_hearths_own_origin_is_always_let_in(serve_engine: Serve) -> None:
    """Same-origin: the Origin names the host the request went to (as the chat page's
    requests do, from whatever address the user opened it at)."""
    server = serve_engine(ScriptedEngine(), HearthSettings(cors_origins="https://chat.example.org"))
    own = server.base_url
    with server.client(headers={"Origin": own}) as client:
        assert client.post("/v1/completions", json=WRITES["/v1/completions"]).status_code == 200
    # The same page opened at another name of this machine (a LAN address, say) still works.
    port = own.rsplit(":", 1)[1]
    headers = {"Origin": f"http://hearth.lan:{port}", "Host": f"hearth.lan:{port}"}
    with server.client(headers=headers) as client:
        assert client.post("/v1/completions", json=WRITES["/v1/completions"]).status_code == 200


@pytest.mark.parametrize("origins", ["localhost", "https://chat.example.org"])
def test_the_chat_page_works_whatever_the_list(
    browser: WebDriver, serve_engine: Serve, origins: str
) -> None:
    engine = ScriptedEngine(end_after=4)
    server = serve_engine(engine, HearthSettings(cors_origins=origins))
    open_page(browser, server.base_url + "/")
    browser.find_element(By.ID, "prompt").send_keys("Hello there")
    browser.find_element(By.ID, "send").click()
    until(lambda: reply_done(browser), timeout=60)
    assert assistant_text(browser) == "Hello, world!"
    assert engine.requests  # the page's POST reached the engine
