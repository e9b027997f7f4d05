"""The rate limit behind the real nginx running deploy/nginx/hearth.conf (a scripted Hearth, so
no model): with `--trustedproxies 127.0.0.1` each real client has its own limit, whatever
X-Forwarded-For it forges, because nginx appends the address it was reached from and Hearth
reads the right-most address that is not a trusted proxy; without it every client behind
nginx is nginx, and a client that sends the header directly is not believed.

The clients are told apart by their source address: 127.0.0.2 and 127.0.0.3, both this
machine's loopback, reaching nginx on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from server.settings.config import HearthSettings
from tests.support.nginx import start_nginx, stop_nginx
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer, free_port, wait_until_ready

Serve = Callable[..., RunningServer]
COMPLETION = {"prompt": "x", "max_tokens": 2}
TOO_QUICKLY = "You are sending requests too quickly. Please try again in 3600 seconds."


@contextmanager
def behind_nginx(server: RunningServer, folder: Path) -> Iterator[str]:
    """nginx with the shipped configuration in front of `server` (as both of its instances);
    the proxy's URL."""
    address = server.base_url.removeprefix("http://")
    port = free_port()
    nginx = start_nginx(folder, [address, address], port)
    try:
        proxy_url = f"http://127.0.0.1:{port}"
        wait_until_ready(proxy_url)
        yield proxy_url
    finally:
        stop_nginx(nginx)


def client_at(source: str, base_url: str) -> httpx.Client:
    """A client whose connections come from the loopback address `source`."""
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=base_url, transport=transport, timeout=60)


def test_behind_nginx_each_real_client_has_its_own_limit(
    serve_engine: Serve, tmp_path: Path
) -> None:
    settings = HearthSettings(ratelimit=3600, trustedproxies=["127.0.0.1"])
    server = serve_engine(ScriptedEngine(), settings)
    with (
        behind_nginx(server, tmp_path) as proxy,
        client_at("127.0.0.2", proxy) as alice,
        client_at("127.0.0.3", proxy) as bob,
    ):
        assert alice.post("/v1/completions", json=COMPLETION).status_code == 200
        again = alice.post("/v1/completions", json=COMPLETION)
        assert again.status_code == 503
        assert again.json()["error"]["message"] == TOO_QUICKLY
        assert again.headers["retry-after"] == "3600"
        # Her forged header is to the left of the address nginx appends: it changes nothing.
        forged = alice.post(
            "/api/v1/generate",
            json={"prompt": "x", "max_length": 2},
            headers={"X-Forwarded-For": "198.51.100.1"},
        )
        assert forged.json() == {"detail": {"msg": TOO_QUICKLY, "type": "service_unavailable"}}
        assert bob.post("/v1/completions", json=COMPLETION).status_code == 200
        assert bob.post("/v1/completions", json=COMPLETION).status_code == 503


def test_without_trusted_proxies_the_header_is_not_believed(
    serve_engine: Serve, tmp_path: Path
) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(ratelimit=3600))
    # Behind nginx, every client is nginx: one limit for all.
    with (
        behind_nginx(server, tmp_path) as proxy,
        client_at("127.0.0.2", proxy) as alice,
        client_at("127.0.0.3", proxy) as bob,
    ):
        assert alice.post("/v1/completions", json=COMPLETION).status_code == 200
        assert bob.post("/v1/completions", json=COMPLETION).status_code == 503
    # Sent straight to Hearth, a forged header does not make a new client.
    with client_at("127.0.0.4", server.base_url) as mallory:
        assert mallory.post("/v1/completions", json=COMPLETION).status_code == 200
        forged = {"X-Forwarded-For": "198.51.100.1"}
        refused = mallory.post("/v1/completions", json=COMPLETION, headers=forged)
        assert refused.status_code == 503
    # Nor from 127.0.0.1 (which nginx's requests above have used up), a peer uvicorn itself
    # would believe the header from.
    with client_at("127.0.0.1", server.base_url) as local:
        forged = {"X-Forwarded-For": "198.51.100.2"}
        assert local.post("/v1/completions", json=COMPLETION, headers=forged).status_code == 503
