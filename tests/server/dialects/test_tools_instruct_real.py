"""Tool calls on the real instruct model (SmolLM2-135M-Instruct, whose ChatML template has no
tool-call format), through the official clients: its own calls stay in the conversation in
every dialect, a forced call cut off by max_tokens is still a call, and with tools offered the
reply or the call streams as it is written."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import ollama
import openai
import pytest

from tests.support.servers import RunningServer

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather now", "parameters": WEATHER},
    }
]
SHORT, LONG = "Oslo", "Reykjavik, the capital of Iceland, by the old harbour"


def openai_history(city: str) -> list[Any]:
    call = {"id": "call_1", "type": "function"}
    call["function"] = {"name": "get_weather", "arguments": json.dumps({"city": city})}
    return [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Cold, -3 C."},
    ]


def anthropic_history(city: str) -> list[Any]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": city}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Cold, -3 C."}
    return [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]


def ollama_history(city: str) -> list[Any]:
    call = {"function": {"name": "get_weather", "arguments": {"city": city}}}
    return [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "Cold, -3 C.", "tool_name": "get_weather"},
    ]


def test_the_models_own_call_stays_in_the_conversation_in_every_dialect(
    instruct_oai: openai.OpenAI, instruct: RunningServer
) -> None:
    """The prompt grows by the call's arguments: the template (which has no place for calls)
    shows the call, so the model reads its own call before the tool's result."""

    def openai_tokens(city: str) -> int:
        answer = instruct_oai.chat.completions.create(
            model="m", messages=openai_history(city), max_tokens=1
        )
        assert answer.usage is not None
        return answer.usage.prompt_tokens

    claude = anthropic.Anthropic(base_url=instruct.base_url, api_key="x", max_retries=0)

    def anthropic_tokens(city: str) -> int:
        return claude.messages.count_tokens(
            model="m", messages=anthropic_history(city)
        ).input_tokens

    llama = ollama.Client(host=instruct.base_url)

    def ollama_tokens(city: str) -> int:
        answer = llama.chat(
            model="m", messages=ollama_history(city), stream=False, options={"num_predict": 1}
        )
        assert answer.prompt_eval_count is not None
        return answer.prompt_eval_count

    for count in (openai_tokens, anthropic_tokens, ollama_tokens):
        grown = count(LONG) - count(SHORT)
        assert grown >= 8, count.__name__  # the longer city's tokens are in the prompt


def test_a_forced_call_cut_off_by_max_tokens_is_a_call_that_says_length(
    instruct_oai: openai.OpenAI,
) -> None:
    answer = instruct_oai.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=TOOLS,
        tool_choice="required",
        max_tokens=12,
        temperature=0.0,
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "length"
    assert not choice.message.content
    assert choice.message.tool_calls and choice.message.tool_calls[0].function.name == "get_weather"
    assert isinstance(json.loads(choice.message.tool_calls[0].function.arguments), dict)


@pytest.mark.parametrize(
    "ask", ["Tell me a short joke about cats.", "What is the weather in Oslo?"]
)
def test_with_tools_offered_the_reply_or_the_call_streams_as_written(
    instruct_oai: openai.OpenAI, ask: str
) -> None:
    """Whatever the hidden decision says, what follows arrives in pieces as it is written,
    never held back to the end (before: a reply without a call came as one chunk at the end,
    a call's arguments as one fragment)."""
    stream = instruct_oai.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": ask}],
        tools=TOOLS,
        stream=True,
        max_tokens=40,
        temperature=0.0,
    )
    texts: list[str] = []
    fragments: list[str] = []
    for chunk in stream:
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is not None and delta.content:
            texts.append(delta.content)
        for call in (delta.tool_calls or []) if delta is not None else []:
            if call.function and call.function.arguments:
                fragments.append(call.function.arguments)
    assert len(texts) + len(fragments) >= 3, (texts, fragments)
    assert not (texts and fragments)  # the decision said one or the other
