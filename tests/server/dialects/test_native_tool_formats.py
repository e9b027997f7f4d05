"""Each native tool-call format through the wire: a scripted model whose template takes tools
writes a call in its own format, and the official clients see it stream (OpenAI's tool_calls
deltas, Anthropic's input_json_delta), its arguments in several pieces. Native tools are the
default (KoboldCpp's jinja_tools, on unless turned off); --nojinjatools goes the KoboldCpp way."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import pytest

from server.core.templates.chat import ChatTemplate
from server.core.templates.tool_formats import ToolFormat
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer
from tests.support.tool_templates import REPLIES, REPLY_TEXT, TEMPLATES, WEATHER_PARAMETERS

Serve = Callable[..., RunningServer]

TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_PARAMETERS}}
]
USER: list[Any] = [{"role": "user", "content": "Weather in Oslo for 3 days?"}]
ARGUMENTS = {"city": "Oslo", "days": 3}


def format_server(
    serve_engine: Serve, tool_format: ToolFormat, settings: HearthSettings | None = None
) -> tuple[RunningServer, ScriptedEngine]:
    """A scripted model writing `tool_format`'s reply four characters at a time, behind the
    format's template; default settings unless given."""
    reply = REPLIES[tool_format].encode()
    pieces = [reply[at : at + 4] for at in range(0, len(reply), 4)]
    template = ChatTemplate(TEMPLATES[tool_format], "llama", bos_token="<s>", eos_token="</s>")
    engine = ScriptedEngine(pieces=pieces, end_after=len(pieces), chat_template=template)
    return serve_engine(engine, settings or HearthSettings()), engine


def expected_text(tool_format: ToolFormat) -> str:
    # gpt-oss's analysis channel is its thought, split from the answer by default
    return "" if tool_format is ToolFormat.HARMONY else REPLY_TEXT[tool_format]


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_openai_chat_streams_each_format(serve_engine: Serve, tool_format: ToolFormat) -> None:
    server, engine = format_server(serve_engine, tool_format)
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    chunks = list(
        client.chat.completions.create(model="m", messages=USER, tools=TOOLS, stream=True)
    )
    request = engine.requests[-1]
    assert request.json_schema is None and "get_weather" in request.prompt  # its own format
    deltas = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or ()]
    assert {d.index for d in deltas} == {0}
    assert [d.function.name for d in deltas if d.function and d.function.name] == ["get_weather"]
    fragments = [d.function.arguments for d in deltas if d.function and d.function.arguments]
    assert len(fragments) >= 3 and json.loads("".join(fragments)) == ARGUMENTS
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == expected_text(tool_format)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    whole = client.chat.completions.create(model="m", messages=USER, tools=TOOLS)
    call = whole.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == ARGUMENTS  # type: ignore[union-attr]
    assert (whole.choices[0].message.content or "") == expected_text(tool_format)


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_anthropic_streams_each_format(serve_engine: Serve, tool_format: ToolFormat) -> None:
    server, _ = format_server(serve_engine, tool_format)
    client = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    tools: list[Any] = [{"name": "get_weather", "input_schema": WEATHER_PARAMETERS}]
    with client.messages.stream(model="m", max_tokens=200, messages=USER, tools=tools) as stream:
        deltas = [
            e.delta.partial_json
            for e in stream
            if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
        ]
        final = stream.get_final_message()
    assert len(deltas) >= 3 and json.loads("".join(deltas)) == ARGUMENTS
    uses = [block for block in final.content if block.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather" and uses[0].input == ARGUMENTS
    assert final.stop_reason == "tool_use"


def test_nojinjatools_makes_calls_the_koboldcpp_way(serve_engine: Serve) -> None:
    settings = parse_command_line(["--nojinjatools"]).settings
    server, engine = format_server(serve_engine, ToolFormat.QWEN3_CODER, settings)
    httpx.post(
        f"{server.base_url}/v1/chat/completions",
        json={"messages": USER, "tools": TOOLS, "tool_choice": "required"},
        timeout=30,
    )
    assert engine.requests[-1].json_schema is not None  # a grammar-bound call
    assert "You can call these tools" in engine.requests[-1].prompt


def test_a_model_without_a_known_format_goes_the_koboldcpp_way(serve_engine: Serve) -> None:
    """The default changes nothing for a template that takes no tools (SmolLM2's ChatML)."""
    chatml = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    engine = ScriptedEngine(chat_template=ChatTemplate(chatml, "llama"))
    server = serve_engine(engine, HearthSettings())
    httpx.post(
        f"{server.base_url}/v1/chat/completions",
        json={"messages": USER, "tools": TOOLS, "tool_choice": "required"},
        timeout=30,
    )
    assert engine.requests[-1].json_schema is not None
