"""--jinjatools with a model whose template uses <tool_call> tags: calls stream live, argument
fragments arriving as generated, through every chat dialect and its official client."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import ollama
import openai

from server.core.templates.chat import ChatTemplate
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]

HERMES_STYLE = (
    "{%- if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}"
    '</tools>\nCall tools as <tool_call>{"name": ..., "arguments": ...}</tool_call>'
    "<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PIECES = [
    b"Checking. ",
    b"<tool_",
    b'call>\n{"name": ',
    b'"get_weather", ',
    b'"arguments": {"ci',
    b'ty": "Os',
    b'lo"}}\n</tool_call>',
]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
USER: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]


def live_server(
    serve_engine: Serve, jinja_tools: bool = True
) -> tuple[RunningServer, ScriptedEngine]:
    engine = ScriptedEngine(
        pieces=PIECES,
        end_after=len(PIECES),
        chat_template=ChatTemplate(HERMES_STYLE, "qwen2", eos_token="</s>"),
    )
    return serve_engine(engine, HearthSettings(jinja_tools=jinja_tools)), engine


def test_openai_chat_streams_argument_fragments(serve_engine: Serve) -> None:
    server, engine = live_server(serve_engine)
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    chunks = list(
        client.chat.completions.create(model="m", messages=USER, tools=TOOLS, stream=True)
    )
    assert '"name": "get_weather"' in engine.requests[-1].prompt  # the template got the tools
    assert engine.requests[-1].json_schema is None  # no grammar: the model's own format
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    fragments = [
        call.function.arguments
        for c in chunks
        if c.choices
        for call in c.choices[0].delta.tool_calls or ()
        if call.function and call.function.arguments
    ]
    assert content == "Checking. "
    assert len(fragments) >= 3 and json.loads("".join(fragments)) == {"city": "Oslo"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    with client.chat.completions.stream(model="m", messages=USER, tools=TOOLS) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Oslo"}  # type: ignore[union-attr]

    plain = client.chat.completions.create(model="m", messages=USER, tools=TOOLS)
    assert plain.choices[0].message.content == "Checking. "
    assert plain.choices[0].message.tool_calls[0].function.name == "get_weather"  # type: ignore[index,union-attr]


def test_anthropic_streams_input_json_deltas(serve_engine: Serve) -> None:
    server, _ = live_server(serve_engine)
    client = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    tools: list[Any] = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    with client.messages.stream(model="m", max_tokens=50, messages=USER, tools=tools) as stream:
        deltas = [
            e.delta.partial_json
            for e in stream
            if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
        ]
        final = stream.get_final_message()
    assert len(deltas) >= 3
    assert [block.type for block in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"city": "Oslo"}  # type: ignore[union-attr]
    assert final.stop_reason == "tool_use"


def test_responses_and_ollama_get_the_live_call(serve_engine: Serve) -> None:
    server, _ = live_server(serve_engine)
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    tools: list[Any] = [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    ]
    with client.responses.stream(model="m", input="Weather in Oslo?", tools=tools) as stream:
        deltas = [e for e in stream if e.type == "response.function_call_arguments.delta"]
        final = stream.get_final_response()
    assert len(deltas) >= 3
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert json.loads(final.output[1].arguments) == {"city": "Oslo"}  # type: ignore[union-attr]

    response = ollama.Client(host=server.base_url).chat(model="m", messages=USER, tools=TOOLS)
    assert response.message.content == "Checking. "
    assert response.message.tool_calls[0].function.arguments == {"city": "Oslo"}  # type: ignore[index]


def test_without_jinjatools_the_call_is_grammar_bound(serve_engine: Serve) -> None:
    server, engine = live_server(serve_engine, jinja_tools=False)
    httpx.post(
        f"{server.base_url}/v1/chat/completions",
        json={"messages": USER, "tools": TOOLS, "tool_choice": "required"},
    )
    assert engine.requests[-1].json_schema is not None
    assert "You can call these tools" in engine.requests[-1].prompt
