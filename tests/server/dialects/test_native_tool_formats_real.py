"""Each native tool-call format on a real model: SmolLM2 behind a template that takes tools
(--chat-template-file), its reply bound by a GBNF grammar to a call in that format with the
city left to the model. Real tokens split every marker of the format (none is a special token
of SmolLM2), and the official `openai` client sees the call stream, its arguments in pieces."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import openai
import pytest

from server.core.templates.tool_formats import ToolFormat
from tests.support.servers import RunningServer
from tests.support.tool_templates import REPLIES, REPLY_TEXT, TEMPLATES, WEATHER_PARAMETERS

TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_PARAMETERS}}
]
USER: list[Any] = [{"role": "user", "content": "What is the weather in Oslo for 3 days?"}]


def gbnf_literal(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def call_grammar(tool_format: ToolFormat) -> str:
    """The format's reply as a grammar, its city (Oslo in the fixture) the model's choice."""
    before, after = REPLIES[tool_format].split("Oslo")
    city = "[A-Z] [a-z] [a-z] [a-z]? [a-z]? [a-z]? [a-z]?"
    return f"root ::= {gbnf_literal(before)} city {gbnf_literal(after)}\ncity ::= {city}\n"


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_a_real_model_call_streams_in_its_own_format(
    start_hearth: Callable[[Sequence[str]], RunningServer],
    smollm2: Path,
    tmp_path: Path,
    tool_format: ToolFormat,
) -> None:
    template = tmp_path / f"{tool_format.value}.jinja"
    template.write_text(TEMPLATES[tool_format])
    server = start_hearth(["--model", str(smollm2), "--chat-template-file", str(template)])
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model="m",
        messages=USER,
        tools=TOOLS,
        stream=True,
        max_tokens=120,
        extra_body={"grammar": call_grammar(tool_format)},
    )
    chunks = list(stream)
    deltas = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or ()]
    assert [d.function.name for d in deltas if d.function and d.function.name] == ["get_weather"]
    fragments = [d.function.arguments for d in deltas if d.function and d.function.arguments]
    arguments = json.loads("".join(fragments))
    assert len(fragments) >= 3  # the arguments arrive as the model writes them
    assert re.fullmatch(r"[A-Z][a-z]{2,6}", arguments["city"]) and arguments["days"] == 3
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # gpt-oss's analysis channel is its thought, split from the answer by default
    assert content == ("" if tool_format is ToolFormat.HARMONY else REPLY_TEXT[tool_format])
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
