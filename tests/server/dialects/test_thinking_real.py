"""The thought split from the answer on the real server (SmolLM2-135M-Instruct), streamed and
whole, through the official openai, anthropic and ollama clients: a grammar has the small model
write a `<think>` block, then an answer, in real tokens (the tags cut into several of them), and
a ChatML template that thinks (it takes `enable_thinking`) stands in for its own."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anthropic
import ollama
import openai
import pytest

from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]
GRAMMAR = 'root ::= "<think>" [a-z ]{5,30} "</think>" [A-Za-z ]{3,30}'
THOUGHT, ANSWER = re.compile(r"[a-z ]{5,30}"), re.compile(r"[A-Za-z ]{3,30}")
THINKING_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
    "{% endif %}"
)
USER: Any = [{"role": "user", "content": "What is two and two?"}]
MAX_TOKENS = 60


@pytest.fixture(scope="module")
def thinking_server(
    start_hearth: StartHearth, smollm2: Path, tmp_path_factory: pytest.TempPathFactory
) -> RunningServer:
    template = tmp_path_factory.mktemp("thinking") / "thinking-chatml.jinja"
    template.write_text(THINKING_CHATML)
    return start_hearth(["--model", str(smollm2), "--chat-template-file", str(template)])


def split_well(thought: str | None, answer: str | None) -> None:
    # The whitespace right after a tag is dropped, as llama-server drops it.
    assert thought is not None and THOUGHT.fullmatch(thought), thought
    assert answer is not None and ANSWER.fullmatch(answer) and not answer[0].isspace(), answer


def test_openai_chat(thinking_server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{thinking_server.base_url}/v1", api_key="x", max_retries=0)
    body: Any = {"model": "m", "messages": USER, "max_tokens": MAX_TOKENS}
    whole = client.chat.completions.create(**body, extra_body={"grammar": GRAMMAR})
    message = whole.choices[0].message
    split_well(getattr(message, "reasoning_content", None), message.content)
    usage = whole.usage
    assert usage is not None and usage.completion_tokens_details is not None
    thought_tokens = usage.completion_tokens_details.reasoning_tokens
    assert thought_tokens is not None and 0 < thought_tokens < usage.completion_tokens

    chunks = list(
        client.chat.completions.create(
            **body,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"grammar": GRAMMAR},
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thought = [getattr(d, "reasoning_content", None) or "" for d in deltas]
    assert sum(1 for piece in thought if piece) >= 2  # streamed as generated
    split_well("".join(thought), "".join(d.content or "" for d in deltas))
    last = chunks[-1].usage
    assert last is not None and last.completion_tokens_details is not None
    assert (last.completion_tokens_details.reasoning_tokens or 0) > 0


def test_anthropic(thinking_server: RunningServer) -> None:
    client = anthropic.Anthropic(base_url=thinking_server.base_url, api_key="x", max_retries=0)
    body: Any = {"model": "m", "messages": USER, "max_tokens": MAX_TOKENS}
    whole = client.messages.create(**body, extra_body={"grammar": GRAMMAR})
    assert [block.type for block in whole.content] == ["thinking", "text"]
    split_well(whole.content[0].thinking, whole.content[1].text)  # type: ignore[union-attr]
    with client.messages.stream(**body, extra_body={"grammar": GRAMMAR}) as stream:
        deltas = [
            event.delta.thinking
            for event in stream
            if event.type == "content_block_delta" and event.delta.type == "thinking_delta"
        ]
        final = stream.get_final_message()
    assert len(deltas) >= 2
    split_well("".join(deltas), final.content[1].text)  # type: ignore[union-attr]
    assert final.content[0].thinking == "".join(deltas)  # type: ignore[union-attr]


def test_ollama(thinking_server: RunningServer) -> None:
    client = ollama.Client(host=thinking_server.base_url)
    options: Any = {"num_predict": MAX_TOKENS, "grammar": GRAMMAR}
    whole = client.chat(model="m", messages=USER, options=options)  # think absent: on
    split_well(whole.message.thinking, whole.message.content)
    parts = list(client.chat(model="m", messages=USER, options=options, think=True, stream=True))
    assert sum(1 for part in parts if part.message.thinking) >= 2
    split_well(
        "".join(part.message.thinking or "" for part in parts),
        "".join(part.message.content for part in parts),
    )
    generated = client.generate(model="m", prompt="What is two and two?", options=options)
    split_well(generated.thinking, generated.response)
