"""A thinking model's thought split from its answer on every wire, streamed and whole, through
the official clients, with a scripted model writing `<think>…</think>` in pieces cut inside the
tags; and what each request asks of thinking (effort, budget, off) reaching the generation."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest

from server.core.templates.chat import ChatTemplate
from server.core.types import EngineReport, GenerationRequest, TokenEvent
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]

# A ChatML template that thinks: it shows earlier thoughts, and takes enable_thinking.
THINKING = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
    "{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}"
)
# One that opens the thought itself (DeepSeek-R1's way): the reply starts inside it.
OPENS_THOUGHT = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)
PLAIN = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PIECES = [b"<th", b"ink>\nI", b" should", b" say hi.", b"</thi", b"nk>\n\n", b"Hello", b" there"]
THOUGHT, ANSWER, RAW = "I should say hi.", "Hello there", b"".join(PIECES).decode()
THOUGHT_TOKENS = 6  # each piece is a token: the answer's two are not the thought's
USER: list[Any] = [{"role": "user", "content": "Hi"}]


class TokenEngine(ScriptedEngine):
    """The scripted engine with a token id on each piece's event, so thoughts can be counted."""

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        for event in super().generate(request, cancelled):
            yield replace(event, token_ids=(7,)) if isinstance(event, TokenEvent) else event


def thinking_server(
    serve_engine: Serve,
    template: str = THINKING,
    pieces: list[bytes] = PIECES,
    settings: HearthSettings | None = None,
) -> tuple[RunningServer, TokenEngine]:
    engine = TokenEngine(
        pieces=pieces,
        end_after=len(pieces),
        chat_template=ChatTemplate(template, "qwen2", eos_token="</s>"),
    )
    return serve_engine(engine, settings or HearthSettings()), engine


def openai_client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0)


def test_openai_chat_whole_and_streamed(serve_engine: Serve) -> None:
    server, _ = thinking_server(serve_engine)
    client = openai_client(server)
    whole = client.chat.completions.create(model="m", messages=USER)
    message = whole.choices[0].message
    assert (getattr(message, "reasoning_content", None), message.content) == (THOUGHT, ANSWER)
    assert whole.usage is not None and whole.usage.completion_tokens_details is not None
    assert whole.usage.completion_tokens_details.reasoning_tokens == THOUGHT_TOKENS

    chunks = list(
        client.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thought = [getattr(d, "reasoning_content", None) or "" for d in deltas]
    assert sum(1 for piece in thought if piece) >= 3  # it streamed, piece by piece
    assert "".join(thought) == THOUGHT
    assert "".join(d.content or "" for d in deltas) == ANSWER
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == THOUGHT_TOKENS


def test_reasoning_format_none_keeps_the_raw_text(serve_engine: Serve) -> None:
    server, _ = thinking_server(serve_engine, settings=HearthSettings(reasoning_format="none"))
    client = openai_client(server)
    raw = client.chat.completions.create(model="m", messages=USER)
    assert raw.choices[0].message.content == RAW
    assert getattr(raw.choices[0].message, "reasoning_content", None) is None
    assert raw.usage is not None and raw.usage.completion_tokens_details is not None
    assert raw.usage.completion_tokens_details.reasoning_tokens == 0
    # llama-server's per-request reasoning_format wins over the server's
    split = client.chat.completions.create(
        model="m", messages=USER, extra_body={"reasoning_format": "deepseek"}
    )
    assert split.choices[0].message.content == ANSWER


def test_a_thought_the_template_opened(serve_engine: Serve) -> None:
    pieces = [b"Hm", b"m.</th", b"ink>", b"Yes."]
    server, engine = thinking_server(serve_engine, OPENS_THOUGHT, pieces)
    reply = openai_client(server).chat.completions.create(model="m", messages=USER)
    assert engine.requests[-1].thinking_open
    assert getattr(reply.choices[0].message, "reasoning_content", None) == "Hmm."
    assert reply.choices[0].message.content == "Yes."


def test_responses_reasoning_item(serve_engine: Serve) -> None:
    server, _ = thinking_server(serve_engine)
    client = openai_client(server)
    with client.responses.stream(model="m", input="Hi") as stream:
        events = list(stream)
        final = stream.get_final_response()
    deltas = [e.delta for e in events if e.type == "response.reasoning_text.delta"]
    assert len(deltas) >= 3 and "".join(deltas) == THOUGHT
    done = [e.text for e in events if e.type == "response.reasoning_text.done"]
    assert done == [THOUGHT]
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output_text == ANSWER
    assert final.usage is not None
    assert final.usage.output_tokens_details.reasoning_tokens == THOUGHT_TOKENS
    whole = client.responses.create(model="m", input="Hi")
    thought = whole.output[0]
    assert thought.type == "reasoning" and thought.content is not None
    assert thought.content[0].text == THOUGHT
    assert whole.output_text == ANSWER


def test_anthropic_thinking_block(serve_engine: Serve) -> None:
    server, _ = thinking_server(serve_engine)
    client = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    with client.messages.stream(model="m", max_tokens=50, messages=USER) as stream:
        events = list(stream)
        final = stream.get_final_message()
    deltas = [
        e.delta.thinking
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "thinking_delta"
    ]
    assert len(deltas) >= 3 and "".join(deltas) == THOUGHT
    signatures = [
        e.index
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "signature_delta"
    ]
    assert signatures == [0]  # the SDK's signature_delta, before the block closes
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == THOUGHT  # type: ignore[union-attr]
    assert final.content[1].text == ANSWER  # type: ignore[union-attr]
    whole = client.messages.create(model="m", max_tokens=50, messages=USER)
    assert [block.type for block in whole.content] == ["thinking", "text"]
    assert whole.content[0].thinking == THOUGHT  # type: ignore[union-attr]


def test_ollama_thinking(serve_engine: Serve) -> None:
    server, _ = thinking_server(serve_engine)
    client = ollama.Client(host=server.base_url)
    whole = client.chat(model="m", messages=USER)  # think absent: on, the model thinks
    assert (whole.message.thinking, whole.message.content) == (THOUGHT, ANSWER)
    parts = list(client.chat(model="m", messages=USER, think=True, stream=True))
    assert sum(1 for p in parts if p.message.thinking) >= 3
    assert "".join(p.message.thinking or "" for p in parts) == THOUGHT
    assert "".join(p.message.content for p in parts) == ANSWER
    generated = client.generate(model="m", prompt="Hi", think=True)
    assert (generated.thinking, generated.response) == (THOUGHT, ANSWER)
    streamed = list(client.generate(model="m", prompt="Hi", stream=True))
    assert "".join(p.thinking or "" for p in streamed) == THOUGHT


def test_ollama_on_a_model_that_cannot_think(serve_engine: Serve) -> None:
    server, _ = thinking_server(serve_engine, PLAIN)
    client = ollama.Client(host=server.base_url)
    with pytest.raises(ollama.ResponseError) as refused:
        client.chat(model="m", messages=USER, think=True)
    assert refused.value.status_code == 400
    assert refused.value.error == '"m" does not support thinking'
    # absent, Ollama leaves such a model's text as it wrote it
    assert client.chat(model="m", messages=USER).message.content == RAW
    assert client.chat(model="m", messages=USER, think=False).message.content == ANSWER


def test_kobold_and_completions_keep_the_raw_text(serve_engine: Serve) -> None:
    server, _ = thinking_server(serve_engine)
    kobold = httpx.post(f"{server.base_url}/api/v1/generate", json={"prompt": "Hi"})
    assert kobold.json()["results"][0]["text"] == RAW
    native = httpx.post(f"{server.base_url}/completion", json={"prompt": "Hi"})
    assert native.json()["content"] == RAW
    completion = openai_client(server).completions.create(model="m", prompt="Hi", max_tokens=20)
    assert completion.choices[0].text == RAW


def test_what_requests_ask_of_thinking(serve_engine: Serve) -> None:
    server, engine = thinking_server(serve_engine)
    client = openai_client(server)
    asked = engine.requests
    client.chat.completions.create(model="m", messages=USER, max_tokens=100, reasoning_effort="low")
    assert asked[-1].reasoning_budget == 25  # KoboldCpp's: a quarter of max tokens
    client.chat.completions.create(model="m", messages=USER, reasoning_effort="none")
    assert asked[-1].reasoning_budget == 0
    assert asked[-1].prompt.endswith("<think>\n\n</think>\n\n")  # enable_thinking false
    assert asked[-1].thinking_tags == ("<think>", "</think>")
    maker = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    thinking: Any = {"type": "enabled", "budget_tokens": 40}
    maker.messages.create(model="m", max_tokens=90, messages=USER, thinking=thinking)
    assert asked[-1].reasoning_budget == 40
    assert not asked[-1].prompt.endswith("</think>\n\n")  # enable_thinking true
    maker.messages.create(model="m", max_tokens=90, messages=USER, thinking={"type": "disabled"})
    assert asked[-1].reasoning_budget == 0 and asked[-1].prompt.endswith("</think>\n\n")
    ollama.Client(host=server.base_url).chat(model="m", messages=USER, think=False)
    assert asked[-1].prompt.endswith("</think>\n\n")
    client.chat.completions.create(model="m", messages=USER)
    assert asked[-1].reasoning_budget is None  # no limit: --reasoning-budget -1


def test_the_server_budget(serve_engine: Serve) -> None:
    server, engine = thinking_server(serve_engine, settings=HearthSettings(reasoning_budget=7))
    openai_client(server).chat.completions.create(model="m", messages=USER)
    assert engine.requests[-1].reasoning_budget == 7


def test_earlier_thoughts_reach_the_template(serve_engine: Serve) -> None:
    server, engine = thinking_server(serve_engine)
    earlier = "<think>Said hi before.</think>Hello"
    history: list[Any] = [
        *USER,
        {"role": "assistant", "content": "Hello", "reasoning_content": "Said hi before."},
        {"role": "user", "content": "Again"},
    ]
    openai_client(server).chat.completions.create(model="m", messages=history)
    assert earlier in engine.requests[-1].prompt
    maker = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    blocks: Any = [
        {"type": "thinking", "thinking": "Said hi before.", "signature": ""},
        {"type": "text", "text": "Hello"},
    ]
    turns: Any = [*USER, {"role": "assistant", "content": blocks}, history[-1]]
    maker.messages.create(model="m", max_tokens=20, messages=turns)
    assert earlier in engine.requests[-1].prompt
    given_back: Any = [*USER, {**history[1], "thinking": "Said hi before."}, history[-1]]
    del given_back[1]["reasoning_content"]
    ollama.Client(host=server.base_url).chat(model="m", messages=given_back)
    assert earlier in engine.requests[-1].prompt
    items: Any = [
        {"role": "user", "content": "Hi"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "Said hi before."}],
        },
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Again"},
    ]
    openai_client(server).responses.create(model="m", input=items)
    assert earlier in engine.requests[-1].prompt


HARMONY = (
    "{% for m in messages %}<|start|>{{ m.role }}<|channel|>final<|message|>{{ m.content }}"
    "<|end|>{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}"
)
HARMONY_PIECES = [
    b"<|channel|>analysis<|mess",
    b"age|>Add them",
    b".<|end|><|start|>assistant<|channel|>final<|message|>",
    b"4",
]


def test_harmony_channels(serve_engine: Serve) -> None:
    server, engine = thinking_server(serve_engine, HARMONY, HARMONY_PIECES)
    client = openai_client(server)
    reply = client.chat.completions.create(model="m", messages=USER)
    assert getattr(reply.choices[0].message, "reasoning_content", None) == "Add them."
    assert reply.choices[0].message.content == "4"
    assert engine.requests[-1].thinking_tags == ("<|channel|>analysis<|message|>", "<|end|>")
    chunks = list(client.chat.completions.create(model="m", messages=USER, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == "Add them."
    assert "".join(d.content or "" for d in deltas) == "4"


def test_several_choices_count_their_thoughts(serve_engine: Serve) -> None:
    server, _ = thinking_server(serve_engine)
    reply = openai_client(server).chat.completions.create(model="m", messages=USER, n=2)
    assert [getattr(c.message, "reasoning_content", None) for c in reply.choices] == [THOUGHT] * 2
    assert reply.usage is not None and reply.usage.completion_tokens_details is not None
    assert reply.usage.completion_tokens_details.reasoning_tokens == 2 * THOUGHT_TOKENS
    raw = httpx.post(
        f"{server.base_url}/v1/chat/completions",
        json={"messages": USER, "stream": True, "n": 2, "stream_options": {"include_usage": True}},
    )
    events = [json.loads(line[6:]) for line in raw.text.splitlines() if line[6:7] == "{"]
    assert events[-1]["usage"]["completion_tokens_details"]["reasoning_tokens"] == 12


def test_responses_take_chat_template_kwargs_as_chat_does(serve_engine: Any) -> None:
    template = ChatTemplate(
        "{% for m in messages %}{{ m.content }}{% endfor %}[{{ greeting | default('none') }}]",
        "llama",
    )
    engine = ScriptedEngine(chat_template=template, end_after=2)
    server = serve_engine(engine)
    body = {"model": "m", "input": "Hi", "chat_template_kwargs": {"greeting": "YO"}}
    answer = httpx.post(f"{server.base_url}/v1/responses", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert engine.requests[-1].prompt.endswith("Hi[YO]")
