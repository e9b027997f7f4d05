"""The official openai, anthropic and ollama clients against the real server and model."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest

from tests.support.real_server import tokens_time
from tests.support.servers import RunningServer

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
OPENAI_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": WEATHER_SCHEMA,
        },
    }
]
ASK_WEATHER = "What is the weather in Paris right now?"
GREEDY = 0.0


@pytest.fixture(scope="module")
def hearth_oai(hearth: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{hearth.base_url}/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def hearth_claude(hearth: RunningServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=hearth.base_url, api_key="unused", max_retries=0)


def stop_inside(text: str) -> tuple[str, str]:
    """A stop string taken from the middle of a greedy reply, and the text expected before it."""
    stripped = text.strip()
    assert len(stripped) >= 6, f"reply too short to pick a stop from: {text!r}"
    middle = len(text) // 2
    stop = text[middle : middle + 2]
    return stop, text[: text.index(stop)]


def wait_idle(server: RunningServer, timeout: float = 1.0) -> float:
    started = time.monotonic()
    while httpx.get(f"{server.base_url}/api/extra/perf").json()["idle"] != 1:
        assert time.monotonic() - started < timeout, "server still busy"
        time.sleep(0.02)
    return time.monotonic() - started


# -- OpenAI ----------------------------------------------------------------------------------


def test_openai_completions_plain_and_streamed(hearth_oai: openai.OpenAI) -> None:
    # A first run puts the prompt in the cache, so the two compared meet the same cache state
    # (a first run cuts the prompt into decode calls otherwise, which moves the logits: how
    # far depends on the CPU, and a near-tied greedy token may flip).
    hearth_oai.completions.create(model="any", prompt="Once upon a time", max_tokens=1)
    plain = hearth_oai.completions.create(
        model="any", prompt="Once upon a time", max_tokens=8, temperature=GREEDY
    )
    choice = plain.choices[0]
    assert plain.object == "text_completion" and choice.text
    assert plain.usage is not None and 0 < plain.usage.completion_tokens <= 8
    assert (choice.finish_reason == "length") == (plain.usage.completion_tokens == 8)

    stream = hearth_oai.completions.create(
        model="any",
        prompt="Once upon a time",
        max_tokens=8,
        temperature=GREEDY,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == choice.text
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_openai_completions_default_is_16_tokens(hearth_oai: openai.OpenAI) -> None:
    result = hearth_oai.completions.create(model="any", prompt="The list: 1, 2, 3,")
    assert result.usage is not None and result.usage.completion_tokens <= 16


def test_openai_stop_sequence(hearth_oai: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "Write a sentence about cats."}]
    # The prompt into the cache first: the free and the stopped run then meet the same cache
    # state, and so give the same tokens up to the stop string on any CPU.
    hearth_oai.chat.completions.create(model="any", messages=messages, max_tokens=1)
    free = hearth_oai.chat.completions.create(
        model="any", messages=messages, max_tokens=20, temperature=GREEDY
    )
    stop, expected = stop_inside(free.choices[0].message.content or "")
    stopped = hearth_oai.chat.completions.create(
        model="any", messages=messages, max_tokens=20, temperature=GREEDY, stop=[stop]
    )
    assert stopped.choices[0].message.content == expected
    assert stopped.choices[0].finish_reason == "stop"


def test_openai_chat_streams_with_usage_and_the_stream_helper(hearth_oai: openai.OpenAI) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name a colour."},
    ]
    chunks = list(
        hearth_oai.chat.completions.create(
            model="any",
            messages=messages,
            max_tokens=12,
            temperature=GREEDY,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert text and len(finishes) == 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0

    with hearth_oai.chat.completions.stream(
        model="any", messages=messages, max_tokens=40, temperature=GREEDY, stop=["\n", "."]
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "".join(deltas)
    assert final.choices[0].finish_reason == "stop"


def test_openai_chat_tool_call_plain_and_streamed(hearth_oai: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": ASK_WEATHER}]
    plain = hearth_oai.chat.completions.create(
        model="any", messages=messages, tools=OPENAI_TOOLS, tool_choice="required", max_tokens=60
    )
    choice = plain.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)

    with hearth_oai.chat.completions.stream(
        model="any", messages=messages, tools=OPENAI_TOOLS, tool_choice="required", max_tokens=60
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    streamed = final.choices[0]
    assert streamed.finish_reason == "tool_calls"
    assert (
        streamed.message.tool_calls
        and streamed.message.tool_calls[0].function.name == "get_weather"
    )
    assert "city" in json.loads(streamed.message.tool_calls[0].function.arguments)


def test_openai_responses_plain_streamed_and_cut_off(hearth_oai: openai.OpenAI) -> None:
    plain = hearth_oai.responses.create(
        model="any", input="Say hello.", max_output_tokens=6, instructions="Be friendly."
    )
    assert plain.output_text and plain.usage is not None
    assert plain.usage.output_tokens <= 6
    if plain.usage.output_tokens == 6:
        assert plain.status == "incomplete"
        assert plain.incomplete_details is not None
        assert plain.incomplete_details.reason == "max_output_tokens"

    with hearth_oai.responses.stream(
        model="any", input="Say hello.", max_output_tokens=6
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert final.output_text and final.usage is not None


def test_openai_responses_tool_call(hearth_oai: openai.OpenAI) -> None:
    tools: list[Any] = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": WEATHER_SCHEMA,
        }
    ]
    with hearth_oai.responses.stream(
        model="any", input=ASK_WEATHER, tools=tools, tool_choice="required", max_output_tokens=60
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.done" in kinds
    call = final.output[0]
    assert call.type == "function_call" and call.name == "get_weather"
    assert "city" in json.loads(call.arguments)


def test_openai_disconnect_frees_the_server(
    hearth_oai: openai.OpenAI, hearth: RunningServer
) -> None:
    soon = tokens_time(hearth)
    stream = hearth_oai.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": "Tell a long story."}],
        max_tokens=400,
        stream=True,
    )
    for index, _ in enumerate(stream):
        if index == 3:
            break
    stream.close()
    wait_idle(hearth, timeout=soon)  # long before its 400 tokens


def test_openai_model_list(hearth_oai: openai.OpenAI) -> None:
    assert [m.id for m in hearth_oai.models.list()] == ["gemma-3-270m-q4_k_m"]


# -- Anthropic -------------------------------------------------------------------------------


def test_anthropic_messages_plain_streamed_and_stopped(hearth_claude: anthropic.Anthropic) -> None:
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "Write a sentence about dogs."}]}
    ]
    # The prompt into the cache first: the plain, streamed and stopped runs compared below
    # then meet the same cache state (a first run is decoded in other pieces, and a near-tied
    # greedy token may come out otherwise on another CPU).
    hearth_claude.messages.create(
        model="any", max_tokens=1, messages=messages, system="You write plainly."
    )
    plain = hearth_claude.messages.create(
        model="any",
        max_tokens=20,
        messages=messages,
        system="You write plainly.",
        extra_body={"temperature": GREEDY},
    )
    assert plain.content[0].type == "text" and plain.content[0].text
    assert plain.usage.input_tokens > 0 and 0 < plain.usage.output_tokens <= 20
    assert plain.stop_reason in ("end_turn", "max_tokens")

    with hearth_claude.messages.stream(
        model="any",
        max_tokens=20,
        messages=messages,
        system="You write plainly.",
        extra_body={"temperature": GREEDY},
    ) as stream:
        streamed_text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed_text == plain.content[0].text
    assert final.usage.output_tokens == plain.usage.output_tokens

    stop, expected = stop_inside(plain.content[0].text)
    stopped = hearth_claude.messages.create(
        model="any",
        max_tokens=20,
        messages=messages,
        system="You write plainly.",
        extra_body={"temperature": GREEDY},
        stop_sequences=[stop],
    )
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == stop
    assert stopped.content[0].type == "text" and stopped.content[0].text == expected


def test_anthropic_tool_use_and_count_tokens(hearth_claude: anthropic.Anthropic) -> None:
    tools: list[Any] = [
        {
            "name": "get_weather",
            "description": "Current weather for a city",
            "input_schema": WEATHER_SCHEMA,
        }
    ]
    messages: list[Any] = [{"role": "user", "content": ASK_WEATHER}]
    with hearth_claude.messages.stream(
        model="any", max_tokens=60, messages=messages, tools=tools, tool_choice={"type": "any"}
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    block = final.content[0]
    assert block.type == "tool_use" and block.name == "get_weather"
    assert isinstance(block.input, dict) and "city" in block.input

    counted = hearth_claude.messages.count_tokens(model="any", messages=messages)
    assert counted.input_tokens > 5


# -- Ollama ----------------------------------------------------------------------------------


def test_ollama_generate_and_chat_plain_and_streamed(llama: ollama.Client) -> None:
    options = {"num_predict": 8, "temperature": GREEDY}
    # Texts are compared only between runs that meet the same cache state: a first run puts
    # the prompt in the cache (and is decoded in other pieces than the runs after it, which
    # can flip a near-tied greedy token on another CPU), so each prompt runs once before.
    llama.generate(model="hearth", prompt="Name a fruit.", options={"num_predict": 1})
    plain = llama.generate(model="hearth", prompt="Name a fruit.", options=options)
    assert plain.done and plain.response and plain.done_reason in ("stop", "length")
    assert plain.eval_count is not None and 0 < plain.eval_count <= 8
    assert plain.eval_duration is not None and plain.eval_duration > 1_000_000  # real ns

    parts = list(
        llama.generate(model="hearth", prompt="Name a fruit.", stream=True, options=options)
    )
    assert "".join(p.response for p in parts) == plain.response
    assert parts[-1].done and parts[-1].eval_count == plain.eval_count

    # The stop string is taken from the plain reply and asked for in the same cache state.
    stop, expected = stop_inside(plain.response)
    stopped = llama.generate(
        model="hearth", prompt="Name a fruit.", options={**options, "stop": [stop]}
    )
    assert stopped.response == expected and stopped.done_reason == "stop"

    messages: list[Any] = [{"role": "user", "content": "Name a colour."}]
    llama.chat(model="hearth", messages=messages, options={"num_predict": 1})
    chat = llama.chat(model="hearth", messages=messages, options=options)
    streamed = list(llama.chat(model="hearth", messages=messages, stream=True, options=options))
    assert "".join(p.message.content or "" for p in streamed) == chat.message.content
    assert streamed[-1].done and streamed[-1].prompt_eval_count


def test_ollama_chat_tool_call(llama: ollama.Client) -> None:
    response = llama.chat(
        model="hearth",
        messages=[{"role": "user", "content": ASK_WEATHER}],
        tools=OPENAI_TOOLS,
        options={"num_predict": 60},
    )
    calls = response.message.tool_calls
    assert calls and calls[0].function.name == "get_weather"
    assert "city" in calls[0].function.arguments


def test_ollama_model_endpoints(llama: ollama.Client) -> None:
    assert llama.list().models[0].model == "gemma-3-270m-q4_k_m:latest"
    assert "tools" in (llama.show("hearth").capabilities or [])
    assert llama.ps().models


# -- raw framing -----------------------------------------------------------------------------


def test_raw_framing_of_each_dialect(hearth: RunningServer) -> None:
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True}
    with httpx.Client(base_url=hearth.base_url, timeout=60) as client:
        raw = client.post("/v1/chat/completions", json=chat).text
        assert "event:" not in raw and raw.rstrip().endswith("data: [DONE]")
        raw = client.post(
            "/v1/completions", json={"prompt": "Hi", "max_tokens": 4, "stream": True}
        ).text
        assert "event:" not in raw and raw.rstrip().endswith("data: [DONE]")

        raw = client.post("/v1/messages", json={**chat, "max_tokens": 4}).text
        names = [line[7:] for line in raw.splitlines() if line.startswith("event: ")]
        assert names[:2] == ["message_start", "content_block_start"]
        assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
        assert "[DONE]" not in raw

        raw = client.post(
            "/v1/responses", json={"input": "Hi", "max_output_tokens": 4, "stream": True}
        ).text
        names = [line[7:] for line in raw.splitlines() if line.startswith("event: ")]
        numbers = [
            json.loads(line[6:])["sequence_number"]
            for line in raw.splitlines()
            if line.startswith("data: ")
        ]
        assert names[0] == "response.created" and names[-1] == "response.completed"
        assert numbers == list(range(len(numbers))) and "[DONE]" not in raw

        response = client.post(
            "/api/chat", json={"model": "m", **chat, "options": {"num_predict": 4}}
        )
        assert response.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in response.text.splitlines()]
        assert all(line["message"]["role"] == "assistant" for line in lines)
        assert lines[-1]["done"] is True and not any(line["done"] for line in lines[:-1])


def test_ollama_disconnect_frees_the_server(llama: ollama.Client, hearth: RunningServer) -> None:
    soon = tokens_time(hearth)
    with (
        httpx.Client(base_url=hearth.base_url, timeout=60) as client,
        client.stream(
            "POST",
            "/api/generate",
            json={"model": "m", "prompt": "A long tale:", "options": {"num_predict": 400}},
        ) as response,
    ):
        lines = response.iter_lines()
        for _ in range(3):
            assert json.loads(next(lines))["done"] is False
    wait_idle(hearth, timeout=soon)  # long before its 400 tokens
