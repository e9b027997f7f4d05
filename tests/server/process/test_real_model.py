"""The KoboldAI API end to end: `python -m server` on the bundled Gemma 3 270M, over real HTTP."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.real_server import (
    GENERATE,
    STEADY,
    STREAM,
    check_text,
    perf,
    tokens_time,
    wait_for,
)
from tests.support.servers import RunningServer
from tests.support.sse import SSEEvent, iter_sse

StartHearth = Callable[[Sequence[str]], RunningServer]
BUSY_BODY = {
    "detail": {"msg": "Server is busy; please try again later.", "type": "service_unavailable"}
}
# ban_eos keeps a base model from ending early, so a request's length is predictable.


def test_startup_prints_progress_and_api_addresses(hearth: RunningServer) -> None:
    hearth.wait_for_output("Loading gemma-3-270m-q4_k_m.gguf: 100%")
    assert hearth.base_url + "/api/" in hearth.wait_for_output("KoboldAI API:")


def test_stream_sends_tokens_one_by_one(hearth: RunningServer) -> None:
    requested_at = time.monotonic()
    with (
        hearth.client() as client,
        client.stream(
            "POST", STREAM, json={"prompt": "Once upon a time", "max_length": 40, **STEADY}
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        events = [e for e in iter_sse(response) if e.data]
    tokens, final = events[:-1], events[-1]
    assert all(e.event == "message" for e in events)
    assert len(tokens) >= 20
    assert all(e.json()["finish_reason"] is None and e.json()["token"] for e in tokens)
    assert final.json() == {"token": "", "finish_reason": "length"}
    # Tokens arrive spread over the generation, not in one burst at the end: the first comes
    # early and the last late in the request's life.
    lifetime = final.received_at - requested_at
    assert tokens[-1].received_at - tokens[0].received_at > 0.5 * lifetime
    assert not any("[DONE]" in e.data for e in events)

    stats = perf(hearth)
    assert stats["last_token_count"] == 40 and stats["stop_reason"] == 0
    assert stats["idle"] == 1 and stats["queue"] == 0 and stats["last_seed"] == 7
    expected_fields = {
        "last_process",
        "last_eval",
        "last_token_count",
        "last_input_count",
        "last_process_time",
        "last_eval_time",
        "last_process_speed",
        "last_eval_speed",
        "last_seed",
        "last_draft_success",
        "last_draft_failed",
        "total_gens",
        "total_img_gens",
        "total_tts_gens",
        "total_transcribe_gens",
        "stop_reason",
        "queue",
        "idle",
        "hordeexitcounter",
        "uptime",
        "idletime",
        "quiet",
    }
    assert expected_fields <= stats.keys()
    assert stats["last_eval_speed"] > 5


def test_request_log_line(hearth: RunningServer) -> None:
    printed_before = len(hearth.output)
    with hearth.client() as client:
        client.post(GENERATE, json={"prompt": "The log line", "max_length": 5, **STEADY})
    line = hearth.wait_for_output("generated 5 tokens", after=printed_before)
    assert re.search(
        r"prompt \d+ tokens \(\d+ cached\), generated 5 tokens, first token "
        r"[\d.]+s, [\d.]+s, [\d.]+ tokens/s, stop: length",
        line,
    )


def test_stop_string_is_trimmed_and_reported_as_stop(hearth: RunningServer) -> None:
    body = {
        "prompt": "Count: 1, 2, 3, 4,",
        "max_length": 24,
        "temperature": 0,
        "ban_eos_token": True,
    }
    with hearth.client() as client:
        # The prompt into the cache first, so the three runs compared meet the same cache
        # state: a first run is cut into decode calls otherwise, which moves the logits (how
        # far depends on the CPU) and may flip a near-tied greedy token.
        client.post(GENERATE, json={**body, "max_length": 1})
        free = client.post(GENERATE, json=body).json()["results"][0]["text"]
        stop = free[free.index(",", 4) : free.index(",", 4) + 2]  # e.g. ", 7"
        expected = free[: free.index(stop)]
        trimmed = client.post(GENERATE, json={**body, "stop_sequence": [stop]}).json()
        kept = client.post(
            GENERATE, json={**body, "stop_sequence": [stop], "trim_stop": False}
        ).json()
    assert trimmed["results"][0]["text"] == expected
    assert trimmed["results"][0]["finish_reason"] == "stop"
    assert kept["results"][0]["text"] == expected + stop
    assert perf(hearth)["stop_reason"] == 2


def test_multibyte_character_split_across_tokens_arrives_whole(hearth: RunningServer) -> None:
    glyph = "🜁"  # no token of its own: the vocabulary spells it as four byte tokens
    with hearth.client() as client:
        count = client.post("/api/extra/tokencount", json={"prompt": glyph, "special": False})
        assert count.json()["value"] >= 4
        with client.stream(
            "POST", STREAM, json={"prompt": (glyph + " ") * 12, "max_length": 24, "temperature": 0}
        ) as response:
            pieces = [e.json()["token"] for e in iter_sse(response) if e.data]
    assert glyph in pieces  # one event carries the whole character
    assert all("\ufffd" not in piece for piece in pieces)
    assert "".join(pieces).count(glyph) >= 3


def test_each_genkey_sees_only_its_own_text(hearth: RunningServer) -> None:
    results: dict[str, dict[str, Any]] = {}

    def generate(genkey: str, length: int, prompt: str) -> None:
        with hearth.client() as client:
            response = client.post(
                GENERATE, json={"prompt": prompt, "max_length": length, "genkey": genkey, **STEADY}
            )
            results[genkey] = response.json()["results"][0]

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(generate, "KEY-A", 120, "Alice went to the market and")
        wait_for(lambda: check_text(hearth, "KEY-A") != "")
        second = pool.submit(generate, "KEY-B", 10, "Bob stayed home and")
        wait_for(lambda: perf(hearth)["queue"] == 1)
        assert check_text(hearth, "KEY-B") == ""  # waiting: nothing yet
        assert check_text(hearth, "KEY-A") != ""
        assert check_text(hearth, "") == ""  # keyed output is never shown anonymously
        get_check = httpx.get(f"{hearth.base_url}/api/extra/generate/check").json()
        assert get_check == {"results": [{"text": ""}]}
        first.result()
        second.result()
    assert check_text(hearth, "KEY-A") == results["KEY-A"]["text"]
    assert check_text(hearth, "KEY-B") == results["KEY-B"]["text"]
    assert results["KEY-A"]["text"] != results["KEY-B"]["text"]


def test_abort_stops_only_the_keyed_running_stream(hearth: RunningServer) -> None:
    with (
        hearth.client() as client,
        client.stream(
            "POST",
            STREAM,
            json={"prompt": "A long story:", "max_length": 400, "genkey": "RUN", **STEADY},
        ) as response,
    ):
        events: list[SSEEvent] = []
        for event in iter_sse(response):
            events.append(event)
            if len(events) == 3:
                other = httpx.post(
                    f"{hearth.base_url}/api/extra/abort", json={"genkey": "SOMEONE-ELSE"}
                ).json()
                assert other == {"success": "false", "done": "false"}
                answer = httpx.post(
                    f"{hearth.base_url}/api/extra/abort", json={"genkey": "RUN"}
                ).json()
                assert answer == {"success": "true", "done": "true"}
    assert events[-1].json()["finish_reason"] == "abort"
    assert len(events) < 50  # aborted at the third of 400 tokens: it stopped at once
    assert perf(hearth)["idle"] == 1


def test_aborted_waiting_request_never_runs(hearth: RunningServer) -> None:
    with (
        ThreadPoolExecutor(1) as pool,
        hearth.client() as client,
        client.stream(
            "POST",
            STREAM,
            json={"prompt": "Occupy:", "max_length": 400, "genkey": "HOLD", **STEADY},
        ) as running,
    ):
        events = iter_sse(running)  # one iterator: dropping it would close the connection
        assert next(events).data
        waiting = pool.submit(
            lambda: httpx.post(
                f"{hearth.base_url}{GENERATE}",
                timeout=60,
                json={"prompt": "never", "max_length": 50, "genkey": "WAIT"},
            ).json()
        )
        wait_for(lambda: perf(hearth)["queue"] == 1)
        answer = httpx.post(f"{hearth.base_url}/api/extra/abort", json={"genkey": "WAIT"})
        assert answer.json()["success"] == "true"
        result = waiting.result(timeout=5)["results"][0]
        assert (result["text"], result["finish_reason"]) == ("", "abort")
        assert result["prompt_tokens"] == 0  # it never reached the model
        assert perf(hearth)["queue"] == 0
        httpx.post(f"{hearth.base_url}/api/extra/abort", json={"genkey": "HOLD"})
        assert list(events)[-1].json()["finish_reason"] == "abort"


def test_disconnect_mid_stream_frees_the_server_at_once(hearth: RunningServer) -> None:
    soon = tokens_time(hearth)
    with (
        hearth.client() as client,
        client.stream(
            "POST", STREAM, json={"prompt": "Leaving soon:", "max_length": 400, **STEADY}
        ) as response,
    ):
        stream = iter_sse(response)
        for _ in range(3):
            next(stream)
        assert perf(hearth)["idle"] == 0
    # Leaving the `with` closed the connection mid-stream: idle long before 400 tokens.
    wait_for(lambda: perf(hearth)["idle"] == 1, timeout=soon)


def test_disconnect_while_waiting_frees_the_place(hearth: RunningServer) -> None:
    soon = tokens_time(hearth)
    with (
        hearth.client() as client,
        client.stream(
            "POST",
            STREAM,
            json={"prompt": "Hold the line:", "max_length": 400, "genkey": "H2", **STEADY},
        ) as running,
    ):
        events = iter_sse(running)
        next(events)
        with (
            httpx.Client(base_url=hearth.base_url) as other,
            other.stream(
                "POST", STREAM, json={"prompt": "I will leave", "max_length": 5}
            ) as waiting,
        ):
            assert waiting.status_code == 200
            wait_for(lambda: perf(hearth)["queue"] == 1)
        wait_for(lambda: perf(hearth)["queue"] == 0, timeout=soon)
        assert perf(hearth)["idle"] == 0  # the running stream was not disturbed
        httpx.post(f"{hearth.base_url}/api/extra/abort", json={"genkey": "H2"})
        assert list(events)[-1].json()["finish_reason"] == "abort"


def test_non_streamed_client_that_gives_up_frees_the_server(hearth: RunningServer) -> None:
    soon = tokens_time(hearth)
    with (
        pytest.raises(httpx.ReadTimeout),
        httpx.Client(base_url=hearth.base_url, timeout=0.5) as client,
    ):
        client.post(GENERATE, json={"prompt": "Patience:", "max_length": 400, **STEADY})
    wait_for(lambda: perf(hearth)["idle"] == 1, timeout=soon)


def test_info_and_token_endpoints(hearth: RunningServer) -> None:
    with hearth.client() as client:
        assert client.get("/api/v1/model").json() == {"result": "koboldcpp/gemma-3-270m-q4_k_m"}
        assert client.get("/api/v1/info/version").json() == {"result": "1.2.5"}
        version = client.get("/api/extra/version").json()
        assert version["result"] == "KoboldCpp" and version["protected"] is False
        assert client.get("/api/v1/config/max_context_length").json() == {"value": 4096}
        assert client.get("/api/extra/true_max_context_length").json() == {"value": 4096}
        assert client.get("/api/v1/config/max_length").json() == {"value": 1536}
        counted = client.post(
            "/api/extra/tokencount", json={"prompt": "Hello world", "special": False}
        ).json()
        assert counted["value"] == len(counted["ids"]) >= 2
        text = client.post("/api/extra/detokenize", json={"ids": counted["ids"][1:]}).json()
        assert text == {"result": "Hello world", "success": True}


def test_prefix_of_previous_prompt_is_reused(hearth: RunningServer) -> None:
    prompt = "A shared introduction that both requests start with. " * 20
    printed_before = len(hearth.output)
    with hearth.client() as client:
        client.post(GENERATE, json={"prompt": prompt + "First", "max_length": 2, **STEADY})
        client.post(GENERATE, json={"prompt": prompt + "Second", "max_length": 3, **STEADY})
    line = hearth.wait_for_output("generated 3 tokens", after=printed_before)
    match = re.search(r"prompt (\d+) tokens \((\d+) cached\)", line)
    assert match is not None
    total, cached = int(match.group(1)), int(match.group(2))
    assert cached >= total - 3 > 100


def _four_at_once(
    server: RunningServer, headers: dict[str, str] | None = None
) -> list[tuple[int, float, Any]]:
    """Send four requests together; return (status, seconds, body) sorted by finish time."""
    barrier = threading.Barrier(4)

    def one(index: int) -> tuple[int, float, Any]:
        with httpx.Client(base_url=server.base_url, timeout=60, headers=headers) as client:
            barrier.wait()
            started = time.monotonic()
            response = client.post(
                GENERATE, json={"prompt": f"Request {index}:", "max_length": 32, **STEADY}
            )
            return response.status_code, time.monotonic() - started, response.json()

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(one, range(4)))
    return sorted(outcomes, key=lambda outcome: outcome[1])


def test_default_queue_serves_four_in_turn(hearth: RunningServer) -> None:
    outcomes = _four_at_once(hearth)
    assert [status for status, _, _ in outcomes] == [200] * 4
    times = [seconds for _, seconds, _ in outcomes]
    single = times[0]
    # About T, 2T, 3T, 4T: each finishes roughly one generation after the previous one.
    for earlier, later in itertools.pairwise(times):
        assert later - earlier > 0.5 * single
    assert times[3] > 2.5 * single


def test_multiuser_2_accepts_two_and_refuses_two(metered: RunningServer) -> None:
    server = metered  # --multiuser 2 (and --metrics: tests/server/conftest.py)
    outcomes = _four_at_once(server)
    assert [status for status, _, _ in outcomes].count(200) == 2
    refused = [body for status, _, body in outcomes if status == 503]
    assert refused == [BUSY_BODY, BUSY_BODY]


def test_multiuser_0_and_password(guarded: RunningServer) -> None:
    server = guarded  # --multiuser 0 --password pw (tests/server/conftest.py)
    unauthorised = httpx.post(f"{server.base_url}{GENERATE}", json={"prompt": "x"})
    assert unauthorised.status_code == 401
    assert unauthorised.json()["detail"]["type"] == "unauthorized"
    outcomes = _four_at_once(server, headers={"Authorization": "Bearer pw"})
    assert [status for status, _, _ in outcomes].count(200) == 1
    assert [body for status, _, body in outcomes if status == 503] == [BUSY_BODY] * 3


def test_server_stops_cleanly_on_interrupt(start_hearth: StartHearth) -> None:
    from tests.support.servers import stop_process

    server = start_hearth(["--quiet"])
    httpx.post(f"{server.base_url}{GENERATE}", json={"prompt": "bye", "max_length": 2})
    assert stop_process(server) == 0
    output = "".join(server.output)
    assert "Hearth stopped." in output
    assert "Traceback" not in output and "Exception ignored" not in output
    assert "input:" not in output  # --quiet hides prompts and outputs
