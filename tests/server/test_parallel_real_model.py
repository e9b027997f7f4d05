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

from tests.server.test_real_model import (
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


# A grammar-bound request has the engine alone (no others join it): while it runs, the requests
# sent wait in line. EOS is banned so that it runs until it is aborted.
HOLD = {
    "prompt": "Hold:",
    "max_length": 1000,
    "grammar": 'root ::= "b"+',
    "ban_eos_token": True,
    "genkey": "HOLD-THE-ENGINE",
}


def in_one_turn(
    server: RunningServer, requests: Sequence[tuple[int, Callable[[], Any]]]
) -> list[Any]:
    """Call each request (with how many jobs it queues: n for n choices) in a thread of its
    own, one after another, while a grammar-bound request holds the engine; once all wait in
    line, abort the hold. The worker then admits them in arrival order into its free slots
    in one turn, so requests sent this way always share their decodes in the same way. Texts
    of batched requests are compared only between such runs: on some CPUs a sequence's logits
    depend, in their last bits, on which other sequences share its decodes. Returns what
    each call returned, in order."""
    queued = 0

    def all_waiting() -> bool:
        return int(perf(server)["queue"]) == queued

    with (
        ThreadPoolExecutor(len(requests)) as pool,  # left last: after a failure, the hold ends
        httpx.Client(base_url=server.base_url, timeout=120) as client,
        client.stream("POST", STREAM, json=HOLD) as held,
    ):
        events = iter_sse(held)
        next(events)  # the hold is generating
        answers = []
        for jobs, request in requests:
            answers.append(pool.submit(request))
            queued += jobs
            wait_for(all_waiting)
        assert client.post("/api/extra/abort", json={"genkey": HOLD["genkey"]}).json() == {
            "success": "true",
            "done": "true",
        }
        assert [event.json()["finish_reason"] for event in events if event.data][-1] == "abort"
        return [answer.result(timeout=300) for answer in answers]


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


# How far one request's log-probabilities may move between batch shapes (see
# test_batched_requests_read_their_own_logits_and_seeds).
SHAPE_TOLERANCE = 0.5


def native(server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{server.base_url}/completion", json=body, timeout=120)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def assert_agree(alone: dict[str, Any], batched: dict[str, Any]) -> None:
    """One greedy request's answers in two batch shapes: the same tokens, the log-probability
    of every alternative both list within SHAPE_TOLERANCE, up to a token where they part; and
    they may part only where the alone run's two candidates were that close (a near-tie)."""
    steps = zip(alone["completion_probabilities"], batched["completion_probabilities"], strict=True)
    for step, (one, other) in enumerate(steps):
        mine = {token["id"]: token["logprob"] for token in one["top_logprobs"]}
        theirs = {token["id"]: token["logprob"] for token in other["top_logprobs"]}
        for token in mine.keys() & theirs.keys():
            assert abs(mine[token] - theirs[token]) < SHAPE_TOLERANCE, (step, token, one, other)
        if one["id"] != other["id"]:
            gap = mine[one["id"]] - mine.get(other["id"], float("-inf"))
            assert gap < 2 * SHAPE_TOLERANCE, (step, one, other)
            return


def test_batched_requests_read_their_own_logits_and_seeds(batched: RunningServer) -> None:
    """In a batch each request reads its own row of the logits and samples with its own
    seeded chain.

    Four different prompts, greedy, alone and then batched: the same tokens with the same
    log-probabilities, within SHAPE_TOLERANCE (`assert_agree`). Not the same texts: on some
    CPUs a sequence's logits depend, in their last bits, on how many sequences share its
    decodes, which can turn a near-tie. Four copies of one seeded, sampled request in one
    batch (the same decodes for each) give one text: each draws from its own seeded chain."""
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
    copies = in_one_turn(batched, [(1, partial(generate, batched, sampled))] * 4)
    texts = [result["text"] for _, result in copies]
    assert len(set(texts)) == 1 and len(texts[0]) > 40, texts


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


def test_grammar_request_waits_for_the_batch_and_runs_alone(batched: RunningServer) -> None:
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
    with (
        httpx.Client(base_url=batched.base_url, timeout=120) as client,
        client.stream(
            "POST", STREAM, json={"prompt": "Batch:", "max_length": 120, "ban_eos_token": True}
        ) as running,
    ):
        events = iter_sse(running)
        next(events)
        with ThreadPoolExecutor(1) as pool:
            tool_call = pool.submit(
                lambda: client.post(
                    "/v1/chat/completions",
                    json={
                        "messages": [{"role": "user", "content": "Weather in Rome?"}],
                        "tools": tools,
                        "tool_choice": "required",
                    },
                )
            )
            remaining = list(events)
            response = tool_call.result()
    assert remaining[-1].json()["finish_reason"] == "length"
    assert response.status_code == 200
    assert response.json()["choices"][0]["finish_reason"] == "tool_calls"
    line = batched.wait_for_output("Batching disabled due to", after=printed_before)
    assert "grammar" in line
    # The grammar-bound call started only once the batch had finished: the server logged the
    # batched request's end before it said the call runs alone.
    printed = batched.output[printed_before:]
    batch_done = next(i for i, text in enumerate(printed) if "generated 120 tokens" in text)
    alone = next(i for i, text in enumerate(printed) if "Batching disabled due to" in text)
    assert batch_done < alone
