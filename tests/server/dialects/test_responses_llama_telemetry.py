"""llama-server's telemetry on a Responses stream, over real HTTP with a scripted engine that
reads its prompt in chunks (unit/test_compat_oai_responses.py::
test_responses_stream_with_llama_telemetry): `response.in_progress` events with
`prompt_progress` while the prompt is read (`return_progress`), `timings` on each text delta
(`timings_per_token`), and at llama-server's path without /v1."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

Serve = Callable[..., RunningServer]


def responses_stream(server: RunningServer, path: str, **extra: Any) -> list[dict[str, Any]]:
    body = {"input": "0123456789", "max_output_tokens": 3, "stream": True, **extra}
    with httpx.stream("POST", server.base_url + path, json=body, timeout=30) as response:
        assert response.status_code == 200, response.read()
        return [event.json() for event in iter_sse(response) if event.data]


@pytest.mark.parametrize("path", ["/v1/responses", "/responses"])
def test_progress_and_per_token_timings_as_llama_server_sends_them(
    serve_engine: Serve, path: str
) -> None:
    engine = ScriptedEngine(pieces=[b"ok"], prompt_chunk=4)
    server = serve_engine(engine)
    events = responses_stream(server, path, timings_per_token=True, return_progress=True)
    assert engine.requests[-1].report_progress
    reports = [event for event in events if "prompt_progress" in event]
    assert {event["type"] for event in reports} == {"response.in_progress"}
    assert reports[-1]["prompt_progress"]["processed"] == reports[-1]["prompt_progress"]["total"]
    assert all(r["response"]["status"] == "in_progress" for r in reports)
    deltas = [event for event in events if event["type"] == "response.output_text.delta"]
    assert deltas and all("predicted_per_second" in delta["timings"] for delta in deltas)
    # The prompt's figures as the last report said them (all of it read, none cached).
    read = reports[-1]["prompt_progress"]["total"]
    assert {(d["timings"]["prompt_n"], d["timings"]["cache_n"]) for d in deltas} == {(read, 0)}
    numbers = [event["sequence_number"] for event in events]
    assert numbers == list(range(len(events)))  # the reports are numbered in their place
    completed = events[-1]
    assert completed["type"] == "response.completed" and "usage" in completed["response"]
    assert completed["timings"]["predicted_n"] == 3


def test_without_asking_no_reports_and_no_per_token_timings(serve_engine: Serve) -> None:
    engine = ScriptedEngine(pieces=[b"ok"], prompt_chunk=4)
    events = responses_stream(serve_engine(engine), "/v1/responses")
    assert not engine.requests[-1].report_progress
    assert all("prompt_progress" not in event for event in events)
    assert all("timings" not in event for event in events[:-1])
