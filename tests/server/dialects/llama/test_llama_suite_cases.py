"""llama-server parity, second round (issue 30), over real HTTP with a scripted engine:
`ignore_eos` reported as the end tokens' logit biases, the generation rate over decode steps
(the first token is free), `/metrics` off answering llama-server's 501, `/cors-proxy` answering
its 403 with the proxy off, and `timings` on a Responses stream's `response.completed`.
Each mirrors a case of llama.cpp's own suite (named in each test) that `make compat` runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest

from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

Serve = Callable[..., RunningServer]
END_TOKENS = (1, 106)  # as a Gemma 3 vocabulary: <eos> and <end_of_turn>


class EndTokensEngine(ScriptedEngine):
    """A scripted model that names its end-of-generation tokens, as the real engine does."""

    @property
    def end_tokens(self) -> Sequence[int]:
        return END_TOKENS


def completion(server: RunningServer, **body: Any) -> dict[str, Any]:
    response = httpx.post(f"{server.base_url}/completion", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_ignore_eos_reports_the_end_tokens_banned_after_the_requests_own(
    serve_engine: Serve,
) -> None:
    """unit/test_ignore_eos.py: `generation_settings.logit_bias` lists each end token with a
    null bias (-inf); the request's own biases come first, as llama-server appends."""
    engine = EndTokensEngine()
    server = serve_engine(engine)
    own = {"bias": -2.5, "token": 65}  # "A", one scripted token per byte
    bans = [{"bias": None, "token": token} for token in END_TOKENS]
    asked = completion(server, prompt="Hi", n_predict=2, ignore_eos=True, logit_bias=[[65, -2.5]])
    assert asked["generation_settings"]["logit_bias"] == [own, *bans]
    assert asked["generation_settings"]["ignore_eos"] is True
    sampling = engine.requests[-1].sampling
    assert sampling.ban_eos and sampling.logit_bias[1:] == tuple(
        (t, float("-inf")) for t in END_TOKENS
    )
    plain = completion(server, prompt="Hi", n_predict=2, logit_bias=[[65, -2.5]])
    assert plain["generation_settings"]["logit_bias"] == [own]
    assert completion(server, prompt="Hi", n_predict=2)["generation_settings"]["logit_bias"] == []


def test_ignore_eos_in_the_streams_final_event(serve_engine: Serve) -> None:
    server = serve_engine(EndTokensEngine())
    body = {"prompt": "Hi", "n_predict": 2, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{server.base_url}/completion", json=body, timeout=30) as response:
        events = [event.json() for event in iter_sse(response) if event.data]
    final = events[-1]
    assert final["stop"] is True
    assert final["generation_settings"]["logit_bias"] == [
        {"bias": None, "token": token} for token in END_TOKENS
    ]


@pytest.mark.parametrize("n_predict", [1, 4])
def test_the_generation_rate_leaves_out_the_free_first_token(
    serve_engine: Serve, n_predict: int
) -> None:
    """unit/test_metrics.py::test_metrics_generation_rate_excludes_first_token: the first token
    comes from the prompt's last batch, so the rate is over n - 1 decode steps (none for one)."""
    server = serve_engine(ScriptedEngine(token_seconds=0.001))
    figures = completion(server, prompt="Hi", n_predict=n_predict)["timings"]
    assert figures["predicted_n"] == n_predict and figures["predicted_ms"] > 0
    steps = n_predict - 1
    assert figures["predicted_per_second"] == (1e3 / figures["predicted_ms"] * steps)
    expected_ms = figures["predicted_ms"] / steps if steps else 0.0
    assert figures["predicted_per_token_ms"] == expected_ms


def test_metrics_off_is_llama_servers_501(serve_engine: Serve) -> None:
    """unit/test_metrics.py::test_metrics_disabled: 501 `not_supported_error`, saying how."""
    server = serve_engine(ScriptedEngine())
    response = httpx.get(f"{server.base_url}/metrics")
    assert response.status_code == 501
    error = response.json()["error"]
    assert error["type"] == "not_supported_error" and error["code"] == 501
    assert "--metrics" in error["message"]


def test_metrics_start_time_header_keeps_llama_servers_spelling(serve_engine: Serve) -> None:
    """unit/test_metrics.py looks `Process-Start-Time-Unix` up case-sensitively."""
    server = serve_engine(ScriptedEngine(), HearthSettings(metrics=True))
    response = httpx.get(f"{server.base_url}/metrics")
    names = [name for name, _value in response.headers.raw]
    assert b"Process-Start-Time-Unix" in names
    assert int(response.headers["process-start-time-unix"]) > 0


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_cors_proxy_is_off_with_llama_servers_403(serve_engine: Serve, method: str) -> None:
    """unit/test_proxy.py::test_mcp_no_proxy: the route exists and says the feature is off."""
    server = serve_engine(ScriptedEngine())
    url = f"{server.base_url}/cors-proxy?url=http://example.com"
    response = httpx.request(method, url)
    assert response.status_code == 403
    assert response.json() == {
        "error": {"message": "this feature is disabled", "type": "feature_disabled"}
    }


def test_cors_proxy_asks_for_the_key_first(serve_engine: Serve) -> None:
    server = serve_engine(ScriptedEngine(), HearthSettings(password="pw"))
    url = f"{server.base_url}/cors-proxy"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer pw"}).status_code == 403


def test_responses_stream_completes_with_timings(serve_engine: Serve) -> None:
    """unit/test_compat_oai_responses.py::test_responses_stream_with_llama_telemetry's end:
    `timings` beside `response` in `response.completed`, as llama-server sends them."""
    server = serve_engine(ScriptedEngine())
    body = {"input": "Hi", "max_output_tokens": 3, "stream": True}
    with httpx.stream("POST", f"{server.base_url}/v1/responses", json=body, timeout=30) as answer:
        events = [event.json() for event in iter_sse(answer) if event.data]
    completed = events[-1]
    assert completed["type"] == "response.completed"
    assert completed["response"]["usage"]["output_tokens"] == 3
    assert completed["timings"]["predicted_n"] == 3
    assert "prompt_per_second" in completed["timings"]
    assert all("timings" not in event for event in events[:-1])  # not asked per token
