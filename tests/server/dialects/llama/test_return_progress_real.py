"""llama-server's `return_progress` on the real model (its own tests, ported): a prompt read
over several decodes of `--batchsize 32` is reported once before any decode (what came from
the cache) and after each decode, up to the whole prompt; a second identical request reports
its cached prefix. On /completion and the OpenAI routes, through the official openai client
too, on one slot and with continuous batching (several choices). The exact shapes against a
scripted engine: test_return_progress_scripted.py."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import openai
import pytest

from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

StartHearth = Callable[[Sequence[str]], RunningServer]
BATCH = 32


@pytest.fixture(scope="module")
def small_batches(start_hearth: StartHearth) -> RunningServer:
    """One slot reading prompts 32 tokens per decode (llama-server's test used 64 of 256)."""
    return start_hearth(["--batchsize", str(BATCH), "--contextsize", "2048"])


@pytest.fixture(scope="module")
def batching(start_hearth: StartHearth) -> RunningServer:
    """Two slots, so the worker batches continuously (its other way of handing events on)."""
    return start_hearth(["--parallelrequests", "2", "--batchsize", "64", "--contextsize", "2048"])


def stream(server: RunningServer, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", server.base_url + path, json={**body, "stream": True}, timeout=120
    ) as response:
        assert response.status_code == 200, response.read()
        return [e.json() for e in iter_sse(response) if e.data and e.data != "[DONE]"]


def progress_of(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [chunk["prompt_progress"] for chunk in chunks if "prompt_progress" in chunk]


def assert_read_in_order(progress: list[dict[str, Any]]) -> None:
    """llama-server's rules: the first report's `processed` is what came from the cache; the
    total and the cached count never change; `processed` rises to the total; time runs on."""
    assert progress, "no prompt_progress at all"
    first, last = progress[0], progress[-1]
    assert first["total"] > 0 and first["cache"] == first["processed"]
    for before, after in itertools.pairwise(progress):
        assert (after["total"], after["cache"]) == (before["total"], before["cache"])
        assert after["processed"] > before["processed"]
        assert after["time_ms"] >= before["time_ms"] >= 0
    assert last["processed"] == last["total"]


@pytest.mark.parametrize("reuse_cache", [False, True])
def test_return_progress(small_batches: RunningServer, reuse_cache: bool) -> None:
    """llama-server's test_return_progress: one report before the first decode, then one
    per decode of the prompt; a prompt already read is reported as cached."""
    content = f"Cache {'warm' if reuse_cache else 'cold'}: " + "This is a test" * 30
    body = {"max_tokens": 10, "messages": [{"role": "user", "content": content}]}
    if reuse_cache:
        stream(small_batches, "/chat/completions", body)  # its state is kept for the next
    progress = progress_of(
        stream(small_batches, "/chat/completions", {**body, "return_progress": True})
    )
    assert_read_in_order(progress)
    total, cache = progress[0]["total"], progress[0]["cache"]
    if reuse_cache:
        assert cache == total - 1  # all but the last token, whose logits start the reply
    else:  # at most the chat template's opening is shared with what the slot held
        assert total - cache > 3 * BATCH  # several decodes of the prompt
    assert len(progress) == 1 + math.ceil((total - cache) / BATCH)


def test_native_completion_reports_before_its_text(small_batches: RunningServer) -> None:
    """llama-server's test_metrics_timings_on_prompt_progress without the `timings` (Hearth's
    /completion has no `timings_per_token`): the reports agree with the final figures."""
    prompt = "the quick brown fox jumps over the lazy dog " * 8
    body = {"prompt": prompt, "n_predict": 4, "return_progress": True}
    chunks = stream(small_batches, "/completion", body)
    progress = progress_of(chunks)
    assert len(progress) > 2  # the prompt did not fit in one decode
    assert_read_in_order(progress)
    assert all(chunk["content"] == "" for chunk in chunks[: len(progress)])  # first, textless
    assert not progress_of(chunks[len(progress) :])
    final = chunks[-1]
    assert final["stop"] is True and final["tokens_evaluated"] == progress[0]["total"]
    assert final["timings"]["cache_n"] == progress[0]["cache"]
    plain = stream(small_batches, "/completion", {**body, "return_progress": False})
    assert not progress_of(plain)


def test_the_openai_client_reads_a_stream_with_reports(small_batches: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{small_batches.base_url}/v1", api_key="unused")
    messages: Any = [{"role": "user", "content": "Write about rivers. " * 20}]
    text, reports = "", []
    for chunk in client.chat.completions.create(
        model="any",
        messages=messages,
        max_tokens=8,
        stream=True,
        extra_body={"return_progress": True},
    ):
        report = (chunk.model_extra or {}).get("prompt_progress")
        if report is not None:
            assert chunk.choices[0].delta.content is None
            reports.append(report)
        elif chunk.choices:
            text += chunk.choices[0].delta.content or ""
    assert text
    assert_read_in_order(reports)
    assert len(reports) > 2
    plain = client.chat.completions.create(
        model="any", messages=messages, max_tokens=8, stream=True
    )
    assert not any((chunk.model_extra or {}).get("prompt_progress") for chunk in plain)
    completions = client.completions.create(
        model="any",
        prompt="Rivers run. " * 30,
        max_tokens=4,
        stream=True,
        extra_body={"return_progress": True},
    )
    extras = [chunk.model_extra or {} for chunk in completions]
    assert_read_in_order(
        [extra["prompt_progress"] for extra in extras if "prompt_progress" in extra]
    )


def test_choices_batched_together_each_report_their_prompt(batching: RunningServer) -> None:
    content = "Choices read together: " + "a story about a lighthouse, " * 30
    body = {
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 4,
        "n": 2,
        "return_progress": True,
    }
    chunks = stream(batching, "/v1/chat/completions", body)
    for index in (0, 1):
        mine = [c for c in chunks if c["choices"] and c["choices"][0]["index"] == index]
        assert_read_in_order(progress_of(mine))
