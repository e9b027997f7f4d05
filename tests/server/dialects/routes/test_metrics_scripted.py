"""`/metrics` with a scripted engine, over real HTTP: llama-server's names and types, each of
Hearth's own counters, the queue gauges, and when the route answers at all (the real-model
runs are in tests/server/dialects/routes/test_metrics_real.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest

from server.settings.config import HearthSettings
from tests.support.metrics_reader import (
    LLAMA_SERVER_COUNTERS,
    LLAMA_SERVER_GAUGES,
    scrape,
    scrape_until,
)
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import SSEEvent, iter_sse

Serve = Callable[..., RunningServer]
STREAM = "/api/extra/generate/stream"


def serve_metrics(serve_engine: Serve, token_seconds: float = 0.0, **settings: object) -> str:
    engine = ScriptedEngine(token_seconds=token_seconds)
    server = serve_engine(engine, HearthSettings(metrics=True, **settings))
    return server.base_url


@contextmanager
def running_stream(base_url: str, genkey: str = "") -> Iterator[Iterator[SSEEvent]]:
    """A long KoboldAI stream, entered once its first token has arrived (so it runs)."""
    body = {"prompt": "Long:", "max_length": 2000, "genkey": genkey}
    with (
        httpx.Client(base_url=base_url, timeout=30) as client,
        client.stream("POST", STREAM, json=body) as response,
    ):
        assert response.status_code == 200
        events = iter_sse(response)
        next(event for event in events if event.data)
        yield events


def test_names_types_and_help_are_llama_servers(serve_engine: Serve) -> None:
    base_url = serve_metrics(serve_engine)
    response = httpx.get(f"{base_url}/metrics")
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert int(response.headers["Process-Start-Time-Unix"]) > 0
    text = response.text
    for name in LLAMA_SERVER_COUNTERS:
        assert f"# TYPE {name} counter\n" in text and f"\n{name} " in text
    for name in LLAMA_SERVER_GAUGES:
        assert f"# TYPE {name} gauge\n" in text and f"\n{name} " in text
    for name in LLAMA_SERVER_COUNTERS + LLAMA_SERVER_GAUGES:
        assert f"# HELP {name} " in text
    assert "# TYPE hearth_queue_wait_seconds histogram" in text


def test_a_completion_adds_its_usage_and_its_queue_wait(serve_engine: Serve) -> None:
    base_url = serve_metrics(serve_engine)
    before = scrape(base_url)
    answer = httpx.post(
        f"{base_url}/v1/completions", json={"model": "m", "prompt": "Count me", "max_tokens": 6}
    ).json()
    after = scrape(base_url)

    def grew(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    usage = answer["usage"]
    prompt = grew("llamacpp:prompt_tokens_total") + grew("llamacpp:prompt_tokens_cached_total")
    assert prompt == usage["prompt_tokens"] == len("Count me")
    assert grew("llamacpp:tokens_predicted_total") == usage["completion_tokens"] == 6
    assert after.value("llamacpp:n_tokens_max") == usage["total_tokens"]
    assert grew("hearth_requests_total", dialect="openai") == 1
    assert grew("hearth_queue_wait_seconds_count") == 1
    assert grew("hearth_queue_wait_seconds_bucket", le="+Inf") == 1
    # the scripted engine does not count decodes: llama-server's figure is there, at 0
    assert after.value("llamacpp:n_decode_total") == 0


def test_running_and_waiting_requests_are_processing_and_deferred(serve_engine: Serve) -> None:
    base_url = serve_metrics(serve_engine, token_seconds=0.01, multiuser=3)
    with running_stream(base_url), running_stream_waiting(base_url):
        current = scrape_until(base_url, lambda s: s.value("llamacpp:requests_deferred") == 1)
        assert current.value("llamacpp:requests_processing") == 1
    done = scrape_until(base_url, lambda s: s.value("llamacpp:requests_processing") == 0)
    assert done.value("llamacpp:requests_deferred") == 0
    assert done.value("hearth_disconnects_total") == 2  # both clients left before the end


@contextmanager
def running_stream_waiting(base_url: str) -> Iterator[None]:
    """A second stream, queued behind a running one (its headers come at once: SSE)."""
    with (
        httpx.Client(base_url=base_url, timeout=30) as client,
        client.stream("POST", STREAM, json={"prompt": "Wait:", "max_length": 5}) as response,
    ):
        assert response.status_code == 200
        yield


def test_a_full_queue_counts_its_503(serve_engine: Serve) -> None:
    base_url = serve_metrics(serve_engine, token_seconds=0.01, multiuser=0)
    with running_stream(base_url):
        refused = httpx.post(f"{base_url}/v1/completions", json={"model": "m", "prompt": "x"})
        assert refused.status_code == 503
        assert scrape(base_url).value("hearth_busy_responses_total") == 1


def test_an_abort_counts_as_an_abort_not_a_disconnect(serve_engine: Serve) -> None:
    base_url = serve_metrics(serve_engine, token_seconds=0.01)
    with running_stream(base_url, genkey="KEY") as events:
        aborted = httpx.post(f"{base_url}/api/extra/abort", json={"genkey": "KEY"}).json()
        assert aborted == {"success": "true", "done": "true"}
        assert [e for e in events if e.data][-1].json()["finish_reason"] == "abort"
    after = scrape_until(base_url, lambda s: s.value("llamacpp:requests_processing") == 0)
    assert after.value("hearth_aborts_total") == 1
    assert after.value("hearth_disconnects_total") == 0


def test_a_client_leaving_mid_stream_counts_a_disconnect(serve_engine: Serve) -> None:
    base_url = serve_metrics(serve_engine, token_seconds=0.01)
    with running_stream(base_url):
        pass  # leaving the block closes the connection after the first token
    scrape_until(base_url, lambda s: s.value("hearth_disconnects_total") == 1)
    assert scrape(base_url).value("hearth_aborts_total") == 0


def test_without_metrics_the_route_is_llama_servers_501_saying_how_to_turn_it_on(
    serve_engine: Serve,
) -> None:
    server = serve_engine(ScriptedEngine())
    response = httpx.get(f"{server.base_url}/metrics")
    assert response.status_code == 501
    error = response.json()["error"]
    assert "--metrics" in error["message"] and error["type"] == "not_supported_error"


@pytest.mark.parametrize("header", ["Authorization", "x-api-key"])
def test_with_a_password_metrics_need_it_and_health_does_not(
    serve_engine: Serve, header: str
) -> None:
    base_url = serve_metrics(serve_engine, password="pw")
    refused = httpx.get(f"{base_url}/metrics")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
    key = "Bearer pw" if header == "Authorization" else "pw"
    assert scrape(base_url, headers={header: key}).value("hearth_aborts_total") == 0
    assert httpx.get(f"{base_url}/health").status_code == 200
