"""llama-server's chat extras on the real model: several choices (`n`), a server-wide --seed,
prompt endings (assistant prefill, `continue_final_message`, `add_generation_prompt`), the
`…/input_tokens` routes, `timings` and `__verbose`. The official openai and anthropic clients
where they have the feature, raw HTTP otherwise."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.support.one_turn import in_one_turn
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

SEED = 42  # the server's --seed: `seeded`'s (tests/server/conftest.py)
BOOK = [
    {"role": "system", "content": "Book"},
    {"role": "user", "content": "What is the best book"},
]
ASSISTANT_HI = {"role": "assistant", "content": "Hi"}


def client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused")


def post(server: RunningServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=120)


def stream(server: RunningServer, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    with httpx.stream(
        "POST", f"{server.base_url}{path}", json={**body, "stream": True}, timeout=120
    ) as response:
        assert response.status_code == 200
        for event in iter_sse(response):
            if event.data != "[DONE]":
                yield json.loads(event.data)


def chat(server: RunningServer, **body: Any) -> Any:
    return client(server).chat.completions.create(
        model="m", messages=BOOK, max_tokens=12, temperature=1.0, **body
    )


def texts_of(answer: Any) -> list[str]:
    return [choice.message.content or "" for choice in answer.choices]


# -- n ------------------------------------------------------------------------------------


def test_n_choices_are_the_replies_of_consecutive_seeds(seeded: RunningServer) -> None:
    """`n: 3, seed: 5` answers three choices, each the reply a single request with seed 5, 6
    or 7 gets (so they differ as separate requests do, and repeat when asked again); usage
    counts the shared prompt once and every choice's reply.

    The singles are queued together as the choices are (`in_one_turn`: with two slots, two
    share their decodes and the third starts when a slot frees), after a first turn that puts
    this prompt in both slots. Sent one by one each would have the engine alone, and on some
    CPUs a sequence's logits depend on which other sequences share its decodes."""
    singles_in_one_turn = [(1, partial(chat, seeded, seed=seed)) for seed in (5, 6, 7)]
    in_one_turn(seeded, singles_in_one_turn)  # the first turn
    singles = in_one_turn(seeded, singles_in_one_turn)
    for _ in range(2):
        (answer,) = in_one_turn(seeded, [(3, lambda: chat(seeded, seed=5, n=3))])
        assert [choice.index for choice in answer.choices] == [0, 1, 2]
        assert texts_of(answer) == [texts_of(single)[0] for single in singles]
        assert len(set(texts_of(answer))) == 3  # each drew with its own seed
        assert all(choice.message.role == "assistant" for choice in answer.choices)
        assert answer.usage.prompt_tokens == singles[0].usage.prompt_tokens
        assert answer.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)


def test_n_choices_stream_interleaved_and_end_once(seeded: RunningServer) -> None:
    """Streamed, each choice has its role chunk, its text and its finish chunk under its own
    index; one usage chunk (with llama-server's timings) and one [DONE] end the stream, and
    the texts are those of the whole answer to the same seeded request (each run queued the
    same way, `in_one_turn`, after a first one, so that its choices share their decodes
    alike)."""
    body: dict[str, Any] = {"model": "m", "messages": BOOK, "max_tokens": 8, "seed": 9, "n": 2}
    whole_in_one_turn = [(2, lambda: client(seeded).chat.completions.create(**body))]
    in_one_turn(seeded, whole_in_one_turn)  # the first turn
    (whole,) = in_one_turn(seeded, whole_in_one_turn)
    streamed_body = {**body, "stream_options": {"include_usage": True}}
    (chunks,) = in_one_turn(
        seeded, [(2, lambda: list(stream(seeded, "/v1/chat/completions", streamed_body)))]
    )
    texts = {0: "", 1: ""}
    finishes: dict[int, str] = {}
    roles = []
    usage_chunks = []
    for chunk in chunks:
        if not chunk["choices"]:
            usage_chunks.append(chunk)
            continue
        (choice,) = chunk["choices"]
        index = choice["index"]
        assert index not in finishes, "a chunk after its choice finished"
        if "role" in choice["delta"]:
            roles.append(index)
        texts[index] += choice["delta"].get("content") or ""
        if choice["finish_reason"]:
            finishes[index] = choice["finish_reason"]
    assert sorted(roles) == [0, 1]
    assert set(finishes) == {0, 1}
    assert [texts[0], texts[1]] == [c.message.content for c in whole.choices]
    (last,) = usage_chunks
    assert last["usage"]["completion_tokens"] == whole.usage.completion_tokens
    assert last["timings"]["predicted_n"] == last["usage"]["completion_tokens"]

    # the official client reads the same stream
    (streamed,) = in_one_turn(
        seeded, [(2, lambda: list(client(seeded).chat.completions.create(**body, stream=True)))]
    )
    by_index = {0: "", 1: ""}
    for chunk in streamed:
        for choice in chunk.choices:
            by_index[choice.index] += choice.delta.content or ""
    assert [by_index[0], by_index[1]] == texts_of(whole)


def test_n_choices_on_completions(seeded: RunningServer) -> None:
    """`n` on /v1/completions: choice i is the reply to the same request with seed 3 + i,
    the single requests queued together as the choices are, after a first turn (see
    test_n_choices_are_the_replies_of_consecutive_seeds). Compared with a single request sent
    alone, the texts may part on some CPUs (as they did on an AVX-512 EPYC)."""

    def complete(**extra: Any) -> Any:
        return client(seeded).completions.create(
            model="m", prompt="Once upon a time", max_tokens=6, temperature=1.0, **extra
        )

    singles_in_one_turn = [(1, partial(complete, seed=seed)) for seed in (3, 4)]
    in_one_turn(seeded, singles_in_one_turn)  # the first turn
    (answer,) = in_one_turn(seeded, [(2, lambda: complete(seed=3, n=2))])
    assert [choice.index for choice in answer.choices] == [0, 1]
    singles = in_one_turn(seeded, singles_in_one_turn)
    assert [choice.text for choice in answer.choices] == [s.choices[0].text for s in singles]
    assert answer.choices[0].text != answer.choices[1].text  # each drew with its own seed


def test_too_many_choices_are_a_400(seeded: RunningServer) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client(seeded).chat.completions.create(model="m", messages=BOOK, n=50)
    assert "n" in str(refused.value)


# -- --seed ---------------------------------------------------------------------------------


def test_requests_without_a_seed_use_the_servers(seeded: RunningServer) -> None:
    """llama-server's --seed: the same request, streamed or not, sampled at a temperature,
    gives the same text; its generation_settings report the seed."""
    body = {"prompt": "I believe the meaning of life is", "n_predict": 16, "temperature": 1.0}
    whole = post(seeded, "/completion", body).json()
    streamed = "".join(chunk["content"] for chunk in stream(seeded, "/completion", body))
    assert whole["content"] == streamed
    assert whole["generation_settings"]["seed"] == SEED
    assert (
        post(seeded, "/completion", {**body, "seed": 7}).json()["generation_settings"]["seed"] == 7
    )


# -- prompt endings -------------------------------------------------------------------------


def prompt_of(server: RunningServer, body: dict[str, Any]) -> str:
    answer = post(server, "/apply-template", body)
    assert answer.status_code == 200, answer.text
    prompt: str = answer.json()["prompt"]
    return prompt


def test_a_final_assistant_message_is_continued(seeded: RunningServer) -> None:
    """llama-server's and Anthropic's prefill: the prompt ends inside the final assistant
    message; `continue_final_message: false` closes it and opens a reply instead, and
    `add_generation_prompt: false` opens none."""
    prefilled = [*BOOK, {"role": "assistant", "content": "Once upon"}]
    assert prompt_of(seeded, {"messages": prefilled}).endswith("<start_of_turn>model\nOnce upon")
    closed = prompt_of(seeded, {"messages": prefilled, "continue_final_message": False})
    assert closed.endswith("Once upon<end_of_turn>\n<start_of_turn>model\n")
    explicit = {"messages": prefilled, "continue_final_message": True}
    assert prompt_of(seeded, {**explicit, "add_generation_prompt": False}) == prompt_of(
        seeded, {"messages": prefilled}
    )
    assert prompt_of(seeded, {"messages": BOOK, "add_generation_prompt": False}).endswith(
        "What is the best book<end_of_turn>\n"
    )

    # The same conversation prefilled through Anthropic's client is the same prompt.
    openai_count = post(seeded, "/chat/completions/input_tokens", {"messages": prefilled})
    messages = anthropic.Anthropic(base_url=seeded.base_url, api_key="unused").messages
    answer = messages.create(
        model="m",
        max_tokens=4,
        system="Book",
        messages=prefilled[1:],  # type: ignore[arg-type]
    )
    assert answer.usage.input_tokens == openai_count.json()["input_tokens"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"add_generation_prompt": True, "continue_final_message": True},
            "Cannot set both add_generation_prompt and continue_final_message to true.",
        ),
        (
            {"messages": [*BOOK, {"role": "assistant", "content": "a"}, ASSISTANT_HI]},
            "Cannot have 2 or more assistant messages at the end of the list.",
        ),
        (
            {"continue_final_message": True, "messages": BOOK},
            "continue_final_message: the last message must be the assistant's",
        ),
    ],
)
def test_prompt_endings_that_cannot_be_are_a_400(
    seeded: RunningServer, extra: dict[str, Any], message: str
) -> None:
    messages = extra.get("messages", [*BOOK, ASSISTANT_HI])
    flags = {key: value for key, value in extra.items() if key != "messages"}
    with pytest.raises(openai.BadRequestError) as refused:
        client(seeded).chat.completions.create(
            model="m", max_tokens=2, messages=messages, extra_body=flags
        )
    assert message in str(refused.value)


# -- input_tokens, timings, __verbose ----------------------------------------------------------


def test_input_tokens_count_what_the_request_would_send(seeded: RunningServer) -> None:
    """`…/input_tokens` (llama-server's routes, and the openai client's
    responses.input_tokens.count) give the prompt size the generation then reports."""
    openai_client = client(seeded)
    sent = openai_client.chat.completions.create(model="m", messages=BOOK, max_tokens=1)
    for path in ("/chat/completions/input_tokens", "/v1/chat/completions/input_tokens"):
        counted = post(seeded, path, {"messages": BOOK}).json()
        assert counted == {
            "object": "response.input_tokens",
            "input_tokens": sent.usage.prompt_tokens if sent.usage else -1,
        }
    question = "What is the best book ever written?"
    counted_response = openai_client.responses.input_tokens.count(
        input=question, instructions="Be brief."
    )
    response = openai_client.responses.create(
        model="m", input=question, instructions="Be brief.", max_output_tokens=2
    )
    assert response.usage is not None
    assert counted_response.input_tokens == response.usage.input_tokens > 5
    assert (
        post(
            seeded, "/responses/input_tokens", {"input": question, "instructions": "Be brief."}
        ).json()["input_tokens"]
        == response.usage.input_tokens
    )
    missing = post(seeded, "/chat/completions/input_tokens", {"messages": "a string"})
    assert missing.status_code == 400 and "error" in missing.json()


def test_timings_on_the_last_chunk_and_per_token(seeded: RunningServer) -> None:
    """llama-server's `timings`: in the whole answer and on the stream's last chunk; with
    `timings_per_token`, on every content chunk too (counting up); never on the role chunk."""
    body = {"messages": BOOK, "max_tokens": 10}
    whole = post(seeded, "/chat/completions", body).json()
    assert whole["timings"]["predicted_n"] == whole["usage"]["completion_tokens"]
    assert (
        whole["timings"]["prompt_n"] + whole["timings"]["cache_n"]
        == whole["usage"]["prompt_tokens"]
    )
    chunks = list(
        stream(
            seeded,
            "/chat/completions",
            {**body, "stream_options": {"include_usage": True}, "timings_per_token": True},
        )
    )
    assert "timings" not in chunks[0] and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    counts = [c["timings"]["predicted_n"] for c in chunks[1:] if c["choices"] and "timings" in c]
    content = [c for c in chunks[1:] if c["choices"] and c["choices"][0]["delta"].get("content")]
    assert len(counts) == len(content) > 0 and counts == sorted(counts)
    last = chunks[-1]
    assert last["choices"] == [] and last["timings"]["prompt_per_second"] > 0
    assert last["timings"]["predicted_n"] == last["usage"]["completion_tokens"] <= 10
    plain = list(stream(seeded, "/chat/completions", body))  # no usage asked: on the finish
    assert plain[-1]["choices"][0]["finish_reason"] and "timings" in plain[-1]
    assert not any("timings" in chunk for chunk in plain[:-1])


def test_verbose_adds_the_native_answer(seeded: RunningServer) -> None:
    body = {"messages": BOOK, "max_tokens": 2}
    verbose = post(seeded, "/chat/completions", {**body, "verbose": True}).json()
    native = verbose["__verbose"]
    assert native["prompt"] == prompt_of(seeded, {"messages": BOOK})
    assert "Book" in native["prompt"]
    assert native["content"] == verbose["choices"][0]["message"]["content"]
    assert native["tokens_predicted"] == verbose["usage"]["completion_tokens"]
    assert native["generation_settings"]["seed"] == SEED
    assert "__verbose" not in post(seeded, "/chat/completions", {**body, "verbose": False}).json()
    assert "__verbose" not in post(seeded, "/chat/completions", body).json()
    completion = post(seeded, "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "verbose": True})
    assert completion.json()["__verbose"]["prompt"] == "Hi"
