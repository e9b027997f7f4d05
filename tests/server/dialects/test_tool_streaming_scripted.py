"""Tools offered and the stream still flows, in every dialect, over real HTTP with a scripted
engine: the answer streams once the hidden tool decision says "no tool", a bound call's
arguments stream as written, a keep-alive goes out whenever the wire is silent (even while
tokens are generated and held back), and a call cut off by max_tokens is still a call."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import ollama
import openai

from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
TOOL_JSON = b'{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}'
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
USER: list[Any] = [{"role": "user", "content": "Hi"}]
WORDS = [b"Hello", b" there", b",", b" friend", b"!"]


def pieces_of(data: bytes, size: int) -> list[bytes]:
    return [data[at : at + size] for at in range(0, len(data), size)]


def test_the_answer_streams_token_by_token_once_the_decision_says_no(serve_engine: Serve) -> None:
    engine = ScriptedEngine(WORDS, token_seconds=0.03, end_after=len(WORDS), tool_decision=False)
    server = serve_engine(engine)
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model="m", messages=USER, tools=TOOLS, stream=True, max_tokens=9
    )
    texts = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert texts == [piece.decode() for piece in WORDS]  # one chunk per token, not one at the end

    claude = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    claude_tools: Any = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    with claude.messages.stream(model="m", max_tokens=9, messages=USER, tools=claude_tools) as s:
        deltas = [
            e.delta.text
            for e in s
            if e.type == "content_block_delta" and e.delta.type == "text_delta"
        ]
    assert len(deltas) == len(WORDS)

    lines = ollama.Client(host=server.base_url).chat(
        model="m", messages=USER, tools=TOOLS, stream=True, options={"num_predict": 9}
    )
    assert [line.message.content for line in lines if line.message.content] == [
        piece.decode() for piece in WORDS
    ]


def test_a_bound_calls_arguments_stream_as_they_are_written(serve_engine: Serve) -> None:
    pieces = pieces_of(TOOL_JSON, 6)
    server = serve_engine(ScriptedEngine(pieces, end_after=len(pieces)))
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model="m", messages=USER, tools=TOOLS, tool_choice="required", stream=True
    )
    fragments, names, finish = [], [], None
    for chunk in stream:
        for call in chunk.choices[0].delta.tool_calls or []:
            names += [call.function.name] if call.function and call.function.name else []
            fragments += (
                [call.function.arguments] if call.function and call.function.arguments else []
            )
        finish = chunk.choices[0].finish_reason or finish
    assert names == ["get_weather"] and finish == "tool_calls"
    assert len(fragments) > 5
    assert json.loads("".join(fragments)) == {"city": "Oslo", "unit": "celsius"}


def test_a_keepalive_goes_out_while_tokens_are_held_back(serve_engine: Serve) -> None:
    """Ollama sends a call whole: while it is generated nothing reaches the wire, though
    tokens arrive all the time; the keep-alive goes by the wire's silence, not the engine's."""
    pieces = pieces_of(TOOL_JSON, 2)
    engine = ScriptedEngine(pieces, token_seconds=0.04, end_after=len(pieces))
    server = serve_engine(engine, keepalive_seconds=0.25)
    body = {"model": "m", "messages": USER, "tools": TOOLS, "stream": True}
    with httpx.stream("POST", f"{server.base_url}/api/chat", json=body, timeout=30) as answer:
        lines = list(answer.iter_lines())
    keepalives = [line for line in lines if '"content": ""' in line and '"done": false' in line]
    call_line = next(line for line in lines if "tool_calls" in line)
    assert json.loads(call_line)["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    # The call takes 37 tokens of at least 0.04 s each to write, six keep-alive periods.
    assert len(keepalives) >= 3


def test_anthropic_keeps_alive_with_its_own_ping_event(serve_engine: Serve) -> None:
    engine = ScriptedEngine(WORDS, end_after=2, decision_seconds=0.6, tool_decision=False)
    server = serve_engine(engine, keepalive_seconds=0.1)
    body = {"model": "m", "max_tokens": 9, "messages": USER, "stream": True}
    body["tools"] = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    raw = httpx.post(f"{server.base_url}/v1/messages", json=body, timeout=30).text
    assert "event: ping" in raw and ": keep-alive" not in raw
    claude = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    with claude.messages.stream(model="m", max_tokens=9, messages=USER, tools=body["tools"]) as s:
        assert s.get_final_text() == "Hello there"


def test_a_forced_call_cut_off_by_max_tokens_is_still_a_call(serve_engine: Serve) -> None:
    pieces = pieces_of(TOOL_JSON, 8)  # 7 tokens: ... "arguments": {"city": "Oslo", "u
    server = serve_engine(ScriptedEngine(pieces))
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    cut = client.chat.completions.create(
        model="m", messages=USER, tools=TOOLS, tool_choice="required", max_tokens=7
    )
    choice = cut.choices[0]
    assert choice.finish_reason == "length" and not choice.message.content
    assert choice.message.tool_calls is not None
    assert choice.message.tool_calls[0].function.name == "get_weather"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Oslo"}

    claude = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    message = claude.messages.create(
        model="m",
        max_tokens=7,
        messages=USER,
        tools=[{"name": "get_weather", "input_schema": {"type": "object"}}],
        tool_choice={"type": "any"},
    )
    assert message.stop_reason == "max_tokens"
    assert [block.type for block in message.content] == ["tool_use"]

    answer = ollama.Client(host=server.base_url).chat(
        model="m", messages=USER, tools=TOOLS, stream=False, options={"num_predict": 7}
    )
    assert answer.done_reason == "length"
    assert answer.message.tool_calls and answer.message.tool_calls[0].function.name == "get_weather"


def test_ollama_requests_get_ollamas_own_sampling_defaults(serve_engine: Serve) -> None:
    engine = ScriptedEngine(end_after=2)
    server = serve_engine(engine)
    ollama.Client(host=server.base_url).chat(model="m", messages=USER, stream=False)
    sampling = engine.requests[-1].sampling
    assert (sampling.temperature, sampling.top_k, sampling.top_p) == (0.8, 40, 0.9)
    assert (sampling.rep_pen, sampling.rep_pen_range) == (1.1, 64)
    ollama.Client(host=server.base_url).generate(
        model="m", prompt="x", options={"repeat_penalty": 1.3, "top_k": 7}
    )
    assert (engine.requests[-1].sampling.rep_pen, engine.requests[-1].sampling.top_k) == (1.3, 7)
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    client.chat.completions.create(model="m", messages=USER, max_tokens=2)
    assert engine.requests[-1].sampling.rep_pen == 1.0  # KoboldCpp's, as before
