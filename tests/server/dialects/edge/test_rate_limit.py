"""--ratelimit (per client address, KoboldCpp's) and --keyratelimit (per API key), over real HTTP
with a scripted engine and the limiter's clock replaced by one the test moves, so no test
waits: a second generation within the limit is KoboldCpp's 503 in every dialect's shape with
Retry-After, and served once the clock has moved past it; GETs, token counts and embeddings
are never limited; a key's limit does not depend on the address. The address the limit keys on
behind a proxy (X-Forwarded-For from --trustedproxies only) is read by
server/dialects/edge/client_address.py, tested at the end (and through real nginx in
tests/deploy/test_trusted_proxy.py)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from server.dialects.edge.client_address import forwarded_client, trusted_networks
from server.dialects.edge.rate_limit import RateLimits
from server.settings.config import HearthSettings
from tests.support.error_shapes import TEXT_ENDPOINTS, assert_error_shape, dialect_of
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
USER = [{"role": "user", "content": "Hi"}]
GENERATIONS: dict[str, dict[str, Any]] = {
    "/api/v1/generate": {"prompt": "x", "max_length": 2},
    "/api/extra/generate/stream": {"prompt": "x", "max_length": 2},
    "/v1/completions": {"prompt": "x", "max_tokens": 2},
    "/v1/chat/completions": {"messages": USER, "max_tokens": 2},
    "/v1/responses": {"input": "x", "max_output_tokens": 2},
    "/v1/messages": {"messages": USER, "max_tokens": 2},
    "/api/generate": {"model": "m", "prompt": "x", "stream": False},
    "/api/chat": {"model": "m", "messages": USER, "stream": False},
    "/completion": {"prompt": "x", "n_predict": 2},  # llama-server's own
    "/chat/completions": {"messages": USER, "max_tokens": 2, "stream": True},
}
assert set(TEXT_ENDPOINTS) <= set(GENERATIONS)  # every dialect's text routes are covered


def too_quickly(seconds: int) -> str:
    return f"You are sending requests too quickly. Please try again in {seconds} seconds."


class MovableClock:
    """The limiter's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limited(serve_engine: Serve, **settings: Any) -> tuple[RunningServer, MovableClock]:
    """A scripted server with these rate-limit settings and the test's clock."""
    server = serve_engine(ScriptedEngine(), HearthSettings(**settings))
    assert server.http is not None
    app = server.http.config.app
    assert isinstance(app, FastAPI)
    clock = MovableClock()
    app.state.rate_limits.clock = clock  # built from the settings; only its clock replaced
    return server, clock


def message_of(path: str, body: Any) -> str:
    dialect = dialect_of(path)
    if dialect == "kobold":
        return str(body["detail"]["msg"])
    if dialect == "ollama":
        return str(body["error"])
    return str(body["error"]["message"])


def test_a_second_generation_too_soon_is_koboldcpps_503_in_every_dialect(
    serve_engine: Serve,
) -> None:
    server, clock = limited(serve_engine, ratelimit=5)
    with server.client() as client:
        assert client.post("/api/v1/generate", json=GENERATIONS["/api/v1/generate"]).is_success
        clock.now += 3
        for path, body in GENERATIONS.items():
            refused = client.post(path, json=body)
            assert refused.status_code == 503, (path, refused.text)
            assert refused.headers["retry-after"] == "2"
            assert_error_shape(path, refused.json())
            assert message_of(path, refused.json()) == too_quickly(2), path
        kobold = client.post("/api/v1/generate", json=GENERATIONS["/api/v1/generate"])
        assert kobold.json() == {"detail": {"msg": too_quickly(2), "type": "service_unavailable"}}
        clock.now += 1.5  # half a second left: said as one, never as "0 seconds"
        assert (
            client.post("/v1/completions", json=GENERATIONS["/v1/completions"]).headers[
                "retry-after"
            ]
            == "1"
        )
        clock.now += 0.5  # the limit has passed: served, and the wait starts again
        assert client.post("/v1/messages", json=GENERATIONS["/v1/messages"]).status_code == 200
        assert client.post("/api/chat", json=GENERATIONS["/api/chat"]).status_code == 503


def test_each_route_is_served_once_the_clock_has_moved_on(serve_engine: Serve) -> None:
    server, clock = limited(serve_engine, ratelimit=60)
    with server.client() as client:
        for path, body in GENERATIONS.items():
            answer = client.post(path, json=body)
            assert answer.status_code == 200, (path, answer.text)
            clock.now += 60


def test_reads_token_counts_and_embeddings_are_never_limited(serve_engine: Serve) -> None:
    server, _clock = limited(serve_engine, ratelimit=60)
    with server.client() as client:
        assert client.post("/v1/completions", json=GENERATIONS["/v1/completions"]).is_success
        for _ in range(2):
            for path in ("/api/extra/perf", "/v1/models", "/api/tags", "/props", "/health"):
                assert client.get(path).status_code == 200, path
            for path, body in (
                ("/api/extra/tokencount", {"prompt": "Hello"}),
                ("/tokenize", {"content": "Hello"}),
                ("/v1/embeddings", {"input": "Hello", "model": "m"}),
                ("/api/embed", {"model": "m", "input": "Hello"}),
                ("/api/extra/generate/check", {}),
            ):
                assert client.post(path, json=body).status_code == 200, path
        assert (
            client.post("/v1/completions", json=GENERATIONS["/v1/completions"]).status_code == 503
        )


def test_a_request_for_several_choices_counts_once(serve_engine: Serve) -> None:
    server, _clock = limited(serve_engine, ratelimit=60)
    body = {"messages": USER, "max_tokens": 2, "n": 3}
    with server.client() as client:
        answer = client.post("/v1/chat/completions", json=body)
        assert answer.status_code == 200, answer.text
        assert len(answer.json()["choices"]) == 3
        assert client.post("/v1/chat/completions", json=body).status_code == 503


def test_a_refused_request_does_not_restart_the_wait(serve_engine: Serve) -> None:
    server, clock = limited(serve_engine, ratelimit=10)
    body = GENERATIONS["/v1/completions"]
    with server.client() as client:
        assert client.post("/v1/completions", json=body).status_code == 200
        for _ in range(3):
            clock.now += 3
            assert client.post("/v1/completions", json=body).status_code == 503
        clock.now += 1  # 10 s after the one that was served
        assert client.post("/v1/completions", json=body).status_code == 200


def test_the_key_limit_holds_each_key_whatever_its_address(serve_engine: Serve) -> None:
    """--keyratelimit alone: one address with two keys is two clients; one key is one client
    however it is presented (Bearer or x-api-key); no key is not limited by it."""
    server, clock = limited(serve_engine, keyratelimit=30)
    body = GENERATIONS["/v1/chat/completions"]

    def ask(headers: dict[str, str]) -> int:
        with server.client(headers=headers) as client:
            return client.post("/v1/chat/completions", json=body).status_code

    assert ask({"Authorization": "Bearer key-a"}) == 200
    assert ask({"Authorization": "Bearer key-b"}) == 200
    assert ask({}) == 200 and ask({}) == 200
    assert ask({"Authorization": "Bearer key-a"}) == 503
    assert ask({"x-api-key": "key-a"}) == 503
    clock.now += 30
    assert ask({"x-api-key": "key-a"}) == 200


def test_both_limits_apply_and_the_longer_wait_is_said(serve_engine: Serve) -> None:
    server, clock = limited(serve_engine, ratelimit=5, keyratelimit=60)
    body = GENERATIONS["/v1/messages"]
    with server.client() as client:
        key_a = {"x-api-key": "key-a"}
        assert client.post("/v1/messages", json=body, headers=key_a).status_code == 200
        clock.now += 10  # the address may ask again, key-a may not
        refused = client.post("/v1/messages", json=body, headers=key_a)
        assert refused.status_code == 503
        assert refused.json() == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": too_quickly(50)},
        }
        assert refused.headers["retry-after"] == "50"
        assert client.post("/v1/messages", json=body, headers={"x-api-key": "key-b"}).is_success


def test_without_limits_nothing_is_refused(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine())
    with server.client() as client:
        for _ in range(3):
            assert client.post("/v1/completions", json=GENERATIONS["/v1/completions"]).is_success


def test_the_memory_of_clients_is_bounded() -> None:
    """Clients whose wait is over are forgotten; past `max_entries` the oldest go early."""
    clock = MovableClock()
    limits = RateLimits(10, clock=clock, max_entries=100)
    for number in range(50):
        assert limits.wait(f"10.0.0.{number}", "") == 0
    assert limits.by_address is not None and len(limits.by_address) == 50
    clock.now += 10
    assert limits.wait("10.0.1.1", "") == 0
    assert len(limits.by_address) == 1  # the fifty are over, and gone
    for number in range(300):
        limits.wait(f"10.1.{number // 256}.{number % 256}", "")
    assert len(limits.by_address) == 100
    assert limits.wait("10.1.1.43", "") == 10  # the newest are still held


class TestForwardedFor:
    """Which client X-Forwarded-For names, believed only from --trustedproxies."""

    nginx = trusted_networks(["127.0.0.1"])

    def test_an_untrusted_peer_is_its_own_client(self) -> None:
        assert forwarded_client("203.0.113.9", "10.0.0.1", self.nginx) is None
        assert forwarded_client("203.0.113.9", "10.0.0.1", ()) is None

    def test_the_rightmost_untrusted_address_is_the_client(self) -> None:
        # nginx appends the address it was reached from; what the client wrote is to its left.
        assert forwarded_client("127.0.0.1", "198.51.100.7", self.nginx) == "198.51.100.7"
        assert forwarded_client("127.0.0.1", "6.6.6.6, 198.51.100.7", self.nginx) == (
            "198.51.100.7"
        )
        chain = trusted_networks(["127.0.0.1", "10.0.0.0/8"])
        assert forwarded_client("127.0.0.1", "6.6.6.6, 198.51.100.7, 10.2.3.4", chain) == (
            "198.51.100.7"
        )

    def test_addresses_as_proxies_write_them(self) -> None:
        v6 = trusted_networks(["::1", "fd00::/8"])
        assert forwarded_client("::1", "[2001:db8::5]:4711, fd00::1", v6) == "2001:db8::5"
        assert forwarded_client("::ffff:127.0.0.1", "192.0.2.1:5555", self.nginx) == "192.0.2.1"

    def test_a_malformed_or_empty_header_is_not_believed(self) -> None:
        assert forwarded_client("127.0.0.1", "", self.nginx) is None
        assert forwarded_client("127.0.0.1", "6.6.6.6, not-an-address", self.nginx) is None

    def test_a_request_from_the_proxy_machine_itself(self) -> None:
        assert forwarded_client("127.0.0.1", "127.0.0.1", self.nginx) == "127.0.0.1"

    def test_trusted_proxies_are_checked(self) -> None:
        assert trusted_networks(["10.0.0.0/8", "::1"]) == (
            ipaddress.ip_network("10.0.0.0/8"),
            ipaddress.ip_network("::1"),
        )
        with pytest.raises(ValueError, match="'nginx' is not an IP address or a network"):
            trusted_networks(["nginx"])


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_limit(
    serve_engine: Serve,
) -> None:
    server, _clock = limited(serve_engine, ratelimit=60, trustedproxies=["127.0.0.1"])
    body = GENERATIONS["/api/v1/generate"]

    def ask(forwarded_for: str) -> int:
        headers = {"X-Forwarded-For": forwarded_for}
        return httpx.post(
            f"{server.base_url}/api/v1/generate", json=body, headers=headers
        ).status_code

    assert ask("198.51.100.1") == 200
    assert ask("198.51.100.2") == 200
    assert ask("198.51.100.1") == 503
    assert ask("6.6.6.6, 198.51.100.2") == 503  # a forged hop to its left changes nothing


def test_without_trusted_proxies_x_forwarded_for_is_ignored(serve_engine: Serve) -> None:
    """A client on this machine forging the header is still one client (uvicorn's own
    handling of the header, which believes loopback peers, must be off)."""
    server, _clock = limited(serve_engine, ratelimit=60)
    body = GENERATIONS["/api/v1/generate"]
    with server.client() as client:
        assert client.post("/api/v1/generate", json=body).status_code == 200
        forged = client.post("/api/v1/generate", json=body, headers={"X-Forwarded-For": "9.9.9.9"})
        assert forged.status_code == 503
