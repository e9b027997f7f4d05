"""llama-server's `timings` on the native /completion stream with `timings_per_token`
(unit/test_metrics.py::test_metrics_timings_on_prompt_progress), over real HTTP with a
scripted engine that reads its prompt in chunks: each `prompt_progress` event carries the
prompt's figures so far (none before its first batch is read, no reply yet), never going
backwards; each text event the figures so far too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

Serve = Callable[..., RunningServer]
PROMPT = "the quick brown fox jumps over the lazy dog " * 8


def native_stream(server: RunningServer, **extra: Any) -> list[dict[str, Any]]:
    body = {"prompt": PROMPT, "n_predict": 4, "stream": True, "return_progress": True, **extra}
    with httpx.stream("POST", server.base_url + "/completion", json=body, timeout=30) as answer:
        assert answer.status_code == 200, answer.read()
        return [event.json() for event in iter_sse(answer) if event.data]


def test_progress_events_carry_the_prompts_figures_so_far(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(pieces=[b"ok"], prompt_chunk=8, prompt_seconds=0.001))
    events = native_stream(server, timings_per_token=True)
    reports = [event for event in events if "prompt_progress" in event]
    assert len(reports) > 2
    first = reports[0]["timings"]
    assert (first["prompt_n"], first["prompt_ms"]) == (0, 0.0)
    assert (first["predicted_n"], first["predicted_ms"]) == (0, 0.0)
    read = [report["timings"]["prompt_n"] for report in reports]
    spent = [report["timings"]["prompt_ms"] for report in reports]
    assert read == sorted(read) and spent == sorted(spent) and spent[-1] > 0
    assert read[-1] == reports[-1]["prompt_progress"]["total"]
    for report in reports:
        assert all(value is not None and value >= 0 for value in report["timings"].values())
    texts = [event for event in events if event["content"]]
    # The scripted engine's text comes without token ids: its count is tokens_predicted's.
    predicted = [text["timings"]["predicted_n"] for text in texts]
    assert len(texts) == 4 and predicted == [text["tokens_predicted"] for text in texts]
    assert {text["timings"]["prompt_n"] for text in texts} == {read[-1]}


def test_without_timings_per_token_progress_has_none(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(pieces=[b"ok"], prompt_chunk=8))
    events = native_stream(server)
    assert any("prompt_progress" in event for event in events)
    assert all("timings" not in event for event in events[:-1])
    assert "timings" in events[-1]
