"""--parallelrequests: continuous batching on the real model, over real HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import httpx
import pytest

from tests.support.logits import assert_agree, native
from tests.support.one_turn import in_one_turn
from tests.support.real_server import (
    GENERATE,
    STREAM,
    check_text,
    perf,
    tokens_time,
    wait_for,
)
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

StartHearth = Callable[[Sequence[str]], RunningServer]


@pytest.fixture(scope="module")
def batched(start_hearth: StartHearth) -> RunningServer:
    # multiuser 0 would refuse a second request; with parallel requests it acts like 10.
    return start_hearth(["--parallelrequests", "4", "--multiuser", "0"])


def generate(server: RunningServer, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    response = httpx.post(f"{server.base_url}{GENERATE}", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return time.monotonic() - started, response.json()["results"][0]


def test_console_tells_the_truth_about_batching(batched: RunningServer) -> None:
    line = batched.wait_for_output("Parallel requests:")
    assert "up to 4 generated together" in line
    assert not any("not implemented" in printed for printed in batched.output)


def test_four_at_once_are_generated_together(batched: RunningServer) -> None:
    bodies = [
        {"prompt": f"Tale {i}:", "max_length": 60, "ban_eos_token": True, "sampler_seed": i}
        for i in range(4)
    ]
    barrier = threading.Barrier(4)

    def one(body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        barrier.wait()
        return generate(batched, body)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, bodies))
    times = sorted(seconds for seconds, _ in results)
    assert all(result["completion_tokens"] == 60 for _, result in results)
    # In turn they would end at about T, 2T, 3T, 4T; batched they end together.
    assert times[0] > 0.6 * times[-1]


def test_batched_requests_read_their_own_logits_and_seeds(batched: RunningServer) -> None:
    """In a batch each request reads its own row of the logits and samples with its own
    seeded chain.

    Four different prompts, greedy, alone and then batched: the same tokens with the same
    log-probabilities, within SHAPE_TOLERANCE (`assert_agree`, which fails any pair of these
    prompts from the first token: a row read by the wrong request). Not the same texts: a
    sequence's logits depend on which others share its decodes (on an AVX2 machine too:
    alone and beside a generating request, "Roses are red, violets are" parts at its fifth
    token), which can turn a near-tie. Then four seeded, sampled requests in one batch,
    twice, the first with the same seed both times and the others with other seeds the
    second time: the first one's text is the same, as its draws come from its own chain."""
    prompts = [
        "Fable 0: Once upon a time",
        "The capital of France is",
        "def fibonacci(n):",
        "Ten tips for better sleep: 1.",
    ]
    bodies = [
        {"prompt": prompt, "n_predict": 24, "temperature": 0, "n_probs": 5, "ignore_eos": True}
        for prompt in prompts
    ]
    alone = [native(batched, body) for body in bodies]
    together = in_one_turn(batched, [(1, partial(native, batched, body)) for body in bodies])
    for one, other in zip(alone, together, strict=True):
        assert_agree(one, other)

    sampled = {
        "prompt": "Fable 0: Once upon a time",
        "max_length": 40,
        "sampler_seed": 11,
        "temperature": 0.8,
        "ban_eos_token": True,
    }
    same_seed = [(1, partial(generate, batched, sampled))] * 4
    in_one_turn(batched, same_seed)  # a first turn: every slot then holds this prompt
    first = [result["text"] for _, result in in_one_turn(batched, same_seed)]
    seeds = [(1, partial(generate, batched, {**sampled, "sampler_seed": 11 + i})) for i in range(4)]
    second = [result["text"] for _, result in in_one_turn(batched, seeds)]
    # The first request sits in the same place of the same decodes both times, with seed 11:
    # its text is the same whatever seeds the others draw with.
    assert first[0] == second[0] and len(first[0]) > 40
    assert len(set(second)) > 1  # and the others do draw with their own


def test_multiuser_0_queues_instead_of_refusing(batched: RunningServer) -> None:
    with ThreadPoolExecutor(6) as pool:
        statuses = list(
            pool.map(
                lambda i: (
                    httpx.post(
                        f"{batched.base_url}{GENERATE}",
                        timeout=120,
                        json={"prompt": f"Item {i}", "max_length": 8},
                    ).status_code
                ),
                range(6),
            )
        )
    assert statuses == [200] * 6


def test_check_abort_and_disconnect_see_batched_requests(batched: RunningServer) -> None:
    soon = tokens_time(batched)
    long = {"max_length": 400, "ban_eos_token": True}
    with (
        httpx.Client(base_url=batched.base_url, timeout=60) as client,
        client.stream("POST", STREAM, json={"prompt": "First:", "genkey": "BA", **long}) as first,
        client.stream("POST", STREAM, json={"prompt": "Second:", "genkey": "BB", **long}) as second,
    ):
        first_events, second_events = iter_sse(first), iter_sse(second)
        next(first_events)
        next(second_events)
        assert perf(batched)["running"] == 2 and perf(batched)["idle"] == 0
        wait_for(lambda: check_text(batched, "BA") != "" and check_text(batched, "BB") != "")
        assert check_text(batched, "BA") != check_text(batched, "BB")
        answer = httpx.post(f"{batched.base_url}/api/extra/abort", json={"genkey": "BB"}).json()
        assert answer == {"success": "true", "done": "true"}
        assert list(second_events)[-1].json()["finish_reason"] == "abort"
        assert perf(batched)["running"] == 1  # the other one goes on
        assert next(first_events).json()["finish_reason"] is None
    # Leaving the `with` closed the first stream mid-generation.
    wait_for(lambda: perf(batched)["idle"] == 1, timeout=soon)


def test_a_tool_call_runs_beside_a_generating_request(batched: RunningServer) -> None:
    """A grammar-bound tool call joins the batch (KoboldCpp would make it wait for the batch
    to drain and run alone): it is answered while the other request still generates."""
    printed_before = len(batched.output)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    long_story = {"prompt": "Batch:", "max_length": 1000, "ban_eos_token": True}
    with (
        httpx.Client(base_url=batched.base_url, timeout=120) as client,
        client.stream("POST", STREAM, json=long_story) as running,
    ):
        events = iter_sse(running)
        next(events)
        response = client.post(
            "/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "Weather in Rome?"}],
                "tools": tools,
                "tool_choice": "required",
            },
        )
        still_running = perf(batched)["running"]
        assert next(events).json()["finish_reason"] is None
    assert response.status_code == 200
    assert response.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert still_running == 1  # the story, not yet at its 1000 tokens
    assert not any("Batching disabled" in line for line in batched.output[printed_before:])


def test_a_small_batch_reads_long_prompts_beside_a_generating_one(
    start_hearth: StartHearth,
) -> None:
    """--batchsize below the aligned prompt block (64) once left a long prompt waiting for
    room it never had: the request hung. Both prompts are read and answered, one of them while
    the other generates."""
    server = start_hearth(["--parallelrequests", "2", "--batchsize", "32"])
    prompt = "".join(f"Line {number} of a long prompt.\n" for number in range(30))
    bodies = [
        {"prompt": prompt, "n_predict": 24, "temperature": 0},
        {"prompt": "Another " + prompt, "n_predict": 4, "temperature": 0},
    ]
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(partial(native, server), bodies))
    for answer in answers:
        assert answer["timings"]["prompt_n"] > 64 and answer["tokens_predicted"] > 0
