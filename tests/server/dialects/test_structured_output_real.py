"""Structured output on the real instruct model (SmolLM2-135M-Instruct), through the official
clients' own parsers: the OpenAI SDK's `chat.completions.parse()` and the Anthropic SDK's
`messages.parse()` (its `output_config.format`, which Hearth binds like every dialect's schema).

The poem prompts carry line breaks, which the model copies into the JSON string: the grammar
must make it write them escaped (server/core/llama/sampling/json_grammar.py), or the SDK's parser
fails ("control character found while parsing a string")."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from pydantic import BaseModel, ConfigDict

from tests.support.servers import RunningServer

GREEDY = {"temperature": 0.0}  # the anthropic SDK 2.x has no temperature argument of its own
POEMS = [
    "Copy this poem exactly:\nRoses are red,\nViolets are blue",
    'Return the poem "Roses are red,\nViolets are blue."',
]
CITY: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}


class Poem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str


@pytest.mark.parametrize("prompt", POEMS)
def test_the_openai_sdk_parses_a_poem_with_line_breaks(
    instruct_oai: openai.OpenAI, prompt: str
) -> None:
    answer = instruct_oai.chat.completions.parse(
        model="m",
        messages=[{"role": "user", "content": prompt}],
        response_format=Poem,
        max_tokens=64,
        temperature=0.0,
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.parsed, Poem) and choice.message.parsed.text.strip()


@pytest.mark.parametrize("prompt", POEMS)
def test_the_anthropic_sdk_parses_its_output_format(
    instruct_claude: anthropic.Anthropic, prompt: str
) -> None:
    answer = instruct_claude.messages.parse(
        model="m",
        max_tokens=64,
        messages=[{"role": "user", "content": prompt}],
        output_format=Poem,
        extra_body=GREEDY,
    )
    assert answer.stop_reason == "end_turn"
    assert isinstance(answer.parsed_output, Poem) and answer.parsed_output.text.strip()


def test_anthropic_output_config_binds_plain_and_streamed_replies(
    instruct_claude: anthropic.Anthropic,
) -> None:
    config: Any = {"format": {"type": "json_schema", "schema": CITY}}
    messages: Any = [{"role": "user", "content": "What is the capital of France?"}]
    plain = instruct_claude.messages.create(
        model="m", max_tokens=48, messages=messages, output_config=config, extra_body=GREEDY
    )
    with instruct_claude.messages.stream(
        model="m", max_tokens=48, messages=messages, output_config=config, extra_body=GREEDY
    ) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    for text, reason in [(plain.content[0], plain.stop_reason), (streamed, final.stop_reason)]:
        answer = json.loads(text if isinstance(text, str) else getattr(text, "text", ""))
        assert reason == "end_turn"
        assert set(answer) == {"city", "population"} and isinstance(answer["population"], int)
    # The beta's spelling, `output_format` at the top level, binds the reply too.
    beta = instruct_claude.messages.create(
        model="m",
        max_tokens=48,
        messages=messages,
        extra_body={**GREEDY, "output_format": {"type": "json_schema", "schema": CITY}},
    )
    block = beta.content[0]
    assert block.type == "text" and set(json.loads(block.text)) == {"city", "population"}


def test_anthropic_count_tokens_takes_output_config(instruct_claude: anthropic.Anthropic) -> None:
    messages: Any = [{"role": "user", "content": "What is the capital of France?"}]
    config: Any = {"format": {"type": "json_schema", "schema": CITY}}
    bound = instruct_claude.messages.count_tokens(
        model="m", messages=messages, output_config=config
    )
    free = instruct_claude.messages.count_tokens(model="m", messages=messages)
    assert bound.input_tokens == free.input_tokens > 5  # the schema binds; it is not prompted


@pytest.mark.parametrize(
    ("output_config", "message"),
    [
        ({"format": {"type": "json_schema", "schema": {"type": "no-such"}}}, "Unusable JSON"),
        ({"format": {"type": "xml", "schema": CITY}}, "output_config.format.type"),
        ({"format": {"type": "json_schema", "schema": [1]}}, "output_config.format.schema"),
        ({"format": {"type": "json_schema"}}, "output_config.format.schema"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_an_unusable_output_config_is_anthropics_400(
    instruct: RunningServer, output_config: dict[str, Any], message: str, path: str
) -> None:
    body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}
    answer = httpx.post(f"{instruct.base_url}{path}", json={**body, "output_config": output_config})
    assert answer.status_code == 400
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert message in error["error"]["message"]


def test_a_stop_string_does_not_cut_a_schema_bound_reply(instruct_oai: openai.OpenAI) -> None:
    """A stop string that matches inside the JSON once ended it there (`{ "city": "Paris"`,
    finish_reason stop): the grammar, not a stop string, ends a schema-bound reply."""
    answer = instruct_oai.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "The capital of France, and its population?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": CITY}},
        stop=[",", "}"],
        max_tokens=48,
        temperature=0.0,
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "stop"
    assert set(json.loads(choice.message.content or "")) == {"city", "population"}
