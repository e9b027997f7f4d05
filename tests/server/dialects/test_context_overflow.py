"""A prompt longer than the context, on the real model: refused on the OpenAI and llama-server
routes as llama-server refuses it (400 `exceed_context_size_error` with both sizes, streamed or
not, before any byte of a stream), still cut at the front on KoboldAI's (KoboldCpp's way); one
that fits with too little room left is not cut, and its reply stops at the context's end."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support.real_server import GENERATE
from tests.support.servers import RunningServer


def slot_context(server: RunningServer) -> int:
    props = httpx.get(f"{server.base_url}/props", timeout=10).json()
    return int(props["default_generation_settings"]["n_ctx"])


def gpt(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0)


@pytest.mark.model
def test_openai_and_llama_server_routes_refuse_a_prompt_over_the_context(
    uncached: RunningServer,
) -> None:
    context = slot_context(uncached)
    words = "apple " * (context + 50)
    messages = [{"role": "user", "content": words}]
    with pytest.raises(openai.BadRequestError) as whole:
        gpt(uncached).chat.completions.create(model="any", messages=messages, max_tokens=4)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError) as streamed:
        gpt(uncached).chat.completions.create(
            model="any",
            messages=messages,  # type: ignore[arg-type]
            max_tokens=4,
            stream=True,
        )
    native = httpx.post(
        f"{uncached.base_url}/completion", json={"prompt": words, "n_predict": 4}, timeout=60
    )
    assert native.status_code == 400
    for body in (whole.value.body, streamed.value.body, native.json()["error"]):
        assert isinstance(body, dict)
        assert body["type"] == "exceed_context_size_error"
        assert body["n_ctx"] == context and body["n_prompt_tokens"] > context
        assert f"({context} tokens)" in body["message"]


@pytest.mark.model
def test_koboldai_still_cuts_the_prompt_to_fit(uncached: RunningServer) -> None:
    words = "apple " * (slot_context(uncached) + 50)
    answer = httpx.post(
        f"{uncached.base_url}{GENERATE}", json={"prompt": words, "max_length": 2}, timeout=120
    )
    assert answer.status_code == 200


@pytest.mark.model
def test_a_prompt_that_fits_is_not_cut_and_the_reply_stops_at_the_contexts_end(
    uncached: RunningServer,
) -> None:
    context = slot_context(uncached)
    counted = httpx.post(
        f"{uncached.base_url}/tokenize", json={"content": "apple " * (context - 40)}, timeout=30
    ).json()["tokens"]
    answer = gpt(uncached).completions.create(
        model="any", prompt="apple " * (context - 40), max_tokens=200, temperature=0
    )
    assert answer.usage is not None
    assert answer.usage.prompt_tokens >= len(counted)  # the whole prompt (and BOS)
    assert answer.usage.prompt_tokens + answer.usage.completion_tokens <= context
    assert answer.choices[0].finish_reason == "length"


@pytest.mark.model
def test_a_chat_offering_tools_is_refused_the_same_way(uncached: RunningServer) -> None:
    """With tools and tool_choice auto, the hidden tool decision goes first; the reply that
    cannot fit is still a 400 with both sizes, never a 500 after the decision."""
    context = slot_context(uncached)
    messages = [{"role": "user", "content": "apple " * (context + 50)}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(openai.BadRequestError) as refused:
        gpt(uncached).chat.completions.create(
            model="any",
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            max_tokens=4,
        )
    body = refused.value.body
    assert isinstance(body, dict) and body["type"] == "exceed_context_size_error"
    assert body["n_ctx"] == context and body["n_prompt_tokens"] > context
