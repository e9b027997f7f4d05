"""`/metrics` on the real server (`python -m server --metrics` on the bundled model): the counts
match what responses report, the queue gauges follow real requests, Hearth's own counters
count real 503s, aborts and disconnects, and the route's switch and password hold."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.support.metrics_reader import (
    LLAMA_SERVER_COUNTERS,
    LLAMA_SERVER_GAUGES,
    scrape,
    scrape_until,
)
from tests.support.real_server import STEADY
from tests.support.servers import RunningServer
from tests.support.sse import SSEEvent, iter_sse

STREAM = "/api/extra/generate/stream"
# ban_eos keeps a base model from ending early, so a long request stays running.


# `metered` (--metrics --multiuser 2: one request running, one waiting) is shared with the
# queue tests of test_real_model.py (tests/server/conftest.py): counts are compared with what
# they were before a test.


@contextmanager
def stream(server: RunningServer, genkey: str) -> Iterator[Iterator[SSEEvent]]:
    """A long KoboldAI stream; its events, once the response has started."""
    body = {"prompt": f"A long story ({genkey}):", "max_length": 2000, "genkey": genkey}
    with (
        server.client() as client,
        client.stream("POST", STREAM, json={**body, **STEADY}) as response,
    ):
        assert response.status_code == 200
        yield iter_sse(response)


def test_counts_grow_by_what_a_completion_reports(metered: RunningServer) -> None:
    before = scrape(metered.base_url)
    answer = httpx.post(
        f"{metered.base_url}/v1/completions",
        json={"model": "m", "prompt": "Metrics are counted here:", "max_tokens": 6},
        timeout=120,
    ).json()
    after = scrape(metered.base_url)

    def grew(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    usage = answer["usage"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert grew("llamacpp:prompt_tokens_total") == usage["prompt_tokens"] - cached
    assert grew("llamacpp:prompt_tokens_cached_total") == cached
    assert grew("llamacpp:tokens_predicted_total") == usage["completion_tokens"] > 0
    assert grew("llamacpp:n_decode_total") >= usage["completion_tokens"]  # one per token
    assert grew("llamacpp:prompt_seconds_total") > 0
    assert grew("llamacpp:tokens_predicted_seconds_total") > 0
    assert after.value("llamacpp:n_tokens_max") >= usage["total_tokens"]
    assert after.value("llamacpp:n_busy_slots_per_decode") == 1.0  # one slot, always busy
    assert grew("hearth_requests_total", dialect="openai") == 1
    assert grew("hearth_queue_wait_seconds_count") == 1
    for name in LLAMA_SERVER_COUNTERS:
        assert after.declared_type(name) == "counter", name
    for name in LLAMA_SERVER_GAUGES:
        assert after.declared_type(name) == "gauge", name


def test_queue_gauges_503_abort_and_disconnect(metered: RunningServer) -> None:
    base = metered.base_url
    before = scrape(base)
    with stream(metered, "RUN") as running:
        next(event for event in running if event.data)  # it generates now
        with stream(metered, "WAIT") as waiting:
            queued = scrape_until(base, lambda s: s.value("llamacpp:requests_deferred") == 1)
            assert queued.value("llamacpp:requests_processing") == 1

            refused = httpx.post(f"{base}/api/v1/generate", json={"prompt": "x"}, timeout=60)
            assert refused.status_code == 503
            busy = scrape(base).value("hearth_busy_responses_total")
            assert busy == before.value("hearth_busy_responses_total") + 1

            aborted = httpx.post(f"{base}/api/extra/abort", json={"genkey": "WAIT"}).json()
            assert aborted == {"success": "true", "done": "true"}
            assert [e for e in waiting if e.data][-1].json()["finish_reason"] == "abort"
        # Leaving the block closes the running stream's connection mid-generation.
    after = scrape_until(base, lambda s: s.value("llamacpp:requests_processing") == 0)
    assert after.value("llamacpp:requests_deferred") == 0
    assert after.value("hearth_aborts_total") == before.value("hearth_aborts_total") + 1
    disconnects = after.value("hearth_disconnects_total")
    assert disconnects == before.value("hearth_disconnects_total") + 1
    # Only the running one started: the aborted waiter never left the line for a slot.
    waits = after.value("hearth_queue_wait_seconds_count")
    assert waits == before.value("hearth_queue_wait_seconds_count") + 1
    kobold = after.value("hearth_requests_total", dialect="kobold")
    assert kobold == before.value("hearth_requests_total", dialect="kobold") + 2  # not the 503


def test_off_unless_asked_for(hearth: RunningServer) -> None:
    response = httpx.get(f"{hearth.base_url}/metrics")
    assert response.status_code == 501
    assert "--metrics" in response.json()["error"]["message"]


def test_password_guards_metrics_but_not_health(guarded: RunningServer) -> None:
    server = guarded  # --metrics --password pw (tests/server/conftest.py)
    refused = httpx.get(f"{server.base_url}/metrics")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    allowed = scrape(server.base_url, headers={"Authorization": "Bearer pw"})
    assert allowed.value("llamacpp:requests_processing") == 0
    assert httpx.get(f"{server.base_url}/health").status_code == 200
