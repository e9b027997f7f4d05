"""Issue 13 on the real model: logprobs, logit_bias, grammars and JSON schemas, penalties,
llama-server's native /completion and /slots, Anthropic's media refusal and token count, and
batching of requests that use them. The official openai and anthropic clients where they
have the feature, raw HTTP otherwise."""

from __future__ import annotations

import base64
import json
import math
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest

from tests.support.projector_gguf import png_bytes
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse

PROMPT = "The lighthouse keeper climbed the stairs and"
GREEDY = {"temperature": 0.0}


def client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused")


def post(server: RunningServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=120)


def native(server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    answer = post(server, "/completion", body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def first_token(server: RunningServer, prompt: str = PROMPT) -> tuple[int, str]:
    """The greedy first token after `prompt` (id, text)."""
    body = native(server, {"prompt": prompt, "n_predict": 1, **GREEDY, "return_tokens": True})
    return body["tokens"][0], body["content"]


# -- logprobs ------------------------------------------------------------------------------


def test_chat_logprobs_with_the_openai_client(hearth: RunningServer) -> None:
    messages: Any = [{"role": "user", "content": "Name a colour."}]
    # The prompt into the cache first, so the whole and the streamed run meet the same cache
    # state (a first run is cut into decode calls differently, which moves the logits).
    client(hearth).chat.completions.create(model="any", messages=messages, max_tokens=1)
    whole = client(hearth).chat.completions.create(
        model="any", messages=messages, max_tokens=6, logprobs=True, top_logprobs=3, **GREEDY
    )
    choice = whole.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content
    tokens = choice.logprobs.content
    assert "".join(token.token for token in tokens) == choice.message.content
    assert len(tokens) == whole.usage.completion_tokens  # type: ignore[union-attr]
    for token in tokens:
        assert token.logprob <= 0.0 and bytes(token.bytes or []).decode() == token.token
        assert len(token.top_logprobs) == 3
        ranked = [alternative.logprob for alternative in token.top_logprobs]
        assert ranked == sorted(ranked, reverse=True)
        # Greedy: the chosen token is the most likely one, with the same log-probability.
        assert token.top_logprobs[0].token == token.token
        assert math.isclose(token.top_logprobs[0].logprob, token.logprob)
    assert sum(math.exp(a.logprob) for a in tokens[0].top_logprobs) <= 1.0 + 1e-6

    streamed = client(hearth).chat.completions.create(
        model="any",
        messages=messages,
        max_tokens=6,
        logprobs=True,
        top_logprobs=3,
        stream=True,
        **GREEDY,
    )
    text, pieces, values = "", [], []
    for chunk in streamed:
        delta = chunk.choices[0]
        if delta.delta.content:
            text += delta.delta.content
            assert delta.logprobs is not None and delta.logprobs.content
            pieces += [token.token for token in delta.logprobs.content]
            values += [token.logprob for token in delta.logprobs.content]
    assert "".join(pieces) == text == choice.message.content
    for streamed_value, whole_value in zip(values, [t.logprob for t in tokens], strict=True):
        assert math.isclose(streamed_value, whole_value, abs_tol=1e-4)


def test_completion_logprobs_are_the_legacy_parallel_lists(hearth: RunningServer) -> None:
    answer = client(hearth).completions.create(
        model="any", prompt=PROMPT, max_tokens=4, logprobs=2, **GREEDY
    )
    choice = answer.choices[0]
    logprobs = choice.logprobs
    assert logprobs is not None and logprobs.tokens and logprobs.token_logprobs
    assert "".join(logprobs.tokens) == choice.text
    assert len(logprobs.top_logprobs or []) == len(logprobs.tokens)
    assert logprobs.text_offset == [
        sum(len(t) for t in logprobs.tokens[:i]) for i in range(len(logprobs.tokens))
    ]
    plain = client(hearth).completions.create(model="any", prompt=PROMPT, max_tokens=2)
    assert plain.choices[0].logprobs is None  # only when asked


def test_native_n_probs_and_post_sampling_probs(hearth: RunningServer) -> None:
    native(hearth, {"prompt": PROMPT, "n_predict": 1})  # same cache state for the runs compared
    body = native(hearth, {"prompt": PROMPT, "n_predict": 3, "n_probs": 5, **GREEDY})
    probabilities = body["completion_probabilities"]
    assert len(probabilities) == 3 == body["timings"]["predicted_n"]
    for token in probabilities:
        assert token["logprob"] <= 0 and isinstance(token["bytes"], list)
        assert len(token["top_logprobs"]) == 5 and token["top_logprobs"][0]["id"] == token["id"]
    after = native(
        hearth,
        {
            "prompt": PROMPT,
            "n_predict": 3,
            "n_probs": 10,
            "temperature": 1.0,
            "top_k": 4,
            "post_sampling_probs": True,
        },
    )
    for token in after["completion_probabilities"]:
        # After top-k 4 at most four candidates remain, with probabilities summing to 1.
        assert 0 < token["prob"] <= 1 and 1 <= len(token["top_probs"]) <= 4
        assert math.isclose(sum(p["prob"] for p in token["top_probs"]), 1.0, abs_tol=1e-4)
        assert token["id"] in [p["id"] for p in token["top_probs"]]
    streamed = list(
        stream_native(hearth, {"prompt": PROMPT, "n_predict": 3, "n_probs": 2, **GREEDY})
    )
    chunks = [chunk for chunk in streamed if not chunk["stop"]]
    probabilities_streamed = [p for chunk in chunks for p in chunk["completion_probabilities"]]
    assert [p["id"] for p in probabilities_streamed] == [p["id"] for p in probabilities]


# -- logit_bias ----------------------------------------------------------------------------


def test_logit_bias_bans_a_token_in_every_shape(hearth: RunningServer) -> None:
    token, text = first_token(hearth)
    assert text.strip()
    # OpenAI: {"<id>": -100} through the official client
    biased = client(hearth).completions.create(
        model="any", prompt=PROMPT, max_tokens=1, logit_bias={str(token): -100}, **GREEDY
    )
    assert biased.choices[0].text != text
    # llama-server: [[id, false]] and the token's text as the key
    for bias in ([[token, False]], {text: False}, [[text, -100]]):
        other = native(
            hearth,
            {"prompt": PROMPT, "n_predict": 1, "logit_bias": bias, "return_tokens": True} | GREEDY,
        )
        assert other["tokens"][0] != token, bias
    # A large positive bias forces a token the model would not pick.
    forced = native(
        hearth,
        {"prompt": PROMPT, "n_predict": 2, "logit_bias": {"9999": 100}, "return_tokens": True}
        | GREEDY,
    )
    assert forced["tokens"] == [9999, 9999]
    # KoboldAI: {"<id>": bias}, clamped to ±100
    kobold = post(
        hearth,
        "/api/v1/generate",
        {"prompt": PROMPT, "max_length": 1, "temperature": 0, "logit_bias": {str(token): -500}},
    )
    assert kobold.status_code == 200 and kobold.json()["results"][0]["text"] != text
    for bad in ({"not-a-token-id-or-text": "x"}, {"99999999": -1}):
        refused = post(hearth, "/v1/completions", {"prompt": "a", "logit_bias": bad})
        assert refused.status_code == 400 and "logit_bias" in refused.json()["error"]["message"]


# -- grammars and JSON schemas ---------------------------------------------------------------


def test_a_gbnf_grammar_binds_every_route(hearth: RunningServer) -> None:
    grammar = 'root ::= "a"{5,5}'
    chat = post(
        hearth,
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "grammar": grammar},
    )
    assert chat.json()["choices"][0]["message"]["content"] == "aaaaa"
    completion = post(
        hearth, "/v1/completions", {"prompt": "Hi", "max_tokens": 8, "grammar": grammar}
    )
    assert completion.json()["choices"][0]["text"] == "aaaaa"
    assert native(hearth, {"prompt": "Hi", "n_predict": 8, "grammar": grammar})["content"] == (
        "aaaaa"
    )
    kobold = post(hearth, "/api/v1/generate", {"prompt": "Hi", "max_length": 8, "grammar": grammar})
    assert kobold.json()["results"][0]["text"] == "aaaaa"
    # KoboldCpp also takes a JSON schema in `grammar`.
    schema = json.dumps({"const": "yes"})
    kobold = post(hearth, "/api/v1/generate", {"prompt": "Hi", "max_length": 8, "grammar": schema})
    assert kobold.json()["results"][0]["text"] == '"yes"'

    broken = "root ::= this is (not valid GBNF"
    for path, body in (
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}),
        ("/v1/completions", {"prompt": "Hi"}),
        ("/completion", {"prompt": "Hi"}),
    ):
        refused = post(hearth, path, {**body, "grammar": broken})
        assert refused.status_code == 400, path
        assert "grammar" in refused.json()["error"]["message"]
    refused = post(hearth, "/api/v1/generate", {"prompt": "Hi", "grammar": broken})
    assert refused.status_code == 400 and "grammar" in refused.json()["detail"]["msg"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"json_schema": {"const": "42"}}, '"42"'),
        ({"response_format": {"type": "json_object", "schema": {"const": "42"}}}, '"42"'),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"const": "x"}}}},
            '"x"',
        ),
        ({"response_format": {"type": "json_schema", "schema": {"const": "y"}}}, '"y"'),
        ({"response_format": {"type": "json_object"}}, None),
        ({"response_format": {"type": "text"}}, None),
    ],
)
def test_every_response_format_shape(
    hearth: RunningServer, fields: dict[str, Any], expected: str | None
) -> None:
    body = {"messages": [{"role": "user", "content": "Give an example."}], "max_tokens": 12}
    answer = post(hearth, "/v1/chat/completions", {**body, **fields})
    assert answer.status_code == 200, answer.text
    content = answer.json()["choices"][0]["message"]["content"]
    if expected is not None:
        assert content == expected
    elif fields["response_format"]["type"] == "json_object":
        assert content.lstrip().startswith("{")


@pytest.mark.parametrize(
    "response_format",
    [
        {"type": "sound"},
        {"type": "json_object", "schema": 123},
        {"type": "json_object", "schema": {"type": 123}},
        {"type": "json_object", "schema": {"type": "hiccup"}},
    ],
)
def test_an_unusable_response_format_is_a_400(
    hearth: RunningServer, response_format: dict[str, Any]
) -> None:
    answer = post(
        hearth,
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "Hi"}], "response_format": response_format},
    )
    assert answer.status_code == 400 and answer.json()["error"]["message"]


@pytest.mark.parametrize(
    "messages",
    [None, "string", [123], [{}], [{"role": 123}], [{"role": "system", "content": 123}]],
)
def test_invalid_chat_messages_are_a_400(hearth: RunningServer, messages: Any) -> None:
    answer = post(hearth, "/chat/completions", {"messages": messages})
    assert answer.status_code == 400 and answer.json()["error"]["message"]


# -- penalties -----------------------------------------------------------------------------

REPETITIVE = "cat cat cat cat cat cat cat cat cat cat cat cat"


def test_penalties_change_the_greedy_text_in_every_dialect(hearth: RunningServer) -> None:
    def chat_text(**extra: Any) -> str:
        answer = client(hearth).completions.create(
            model="any", prompt=REPETITIVE, max_tokens=4, **GREEDY, **extra
        )
        return answer.choices[0].text

    # The first run puts the prompt in the cache; every run compared below meets the same
    # cache state after it, so their texts and probabilities may be compared on any CPU.
    chat_text()
    plain = chat_text()
    assert "cat" in plain  # the model repeats without a penalty
    assert "cat" not in chat_text(frequency_penalty=2.0)

    def cat_probability(**penalties: Any) -> float:
        """How likely " cat" is next, after the penalties (post-sampling, greedy)."""
        body = {"prompt": REPETITIVE, "n_predict": 1, "n_probs": 5, "post_sampling_probs": True}
        token = native(hearth, {**body, **GREEDY, **penalties})["completion_probabilities"][0]
        return sum(p["prob"] for p in token["top_probs"] if p["token"] == " cat")

    unpenalised = cat_probability()
    assert unpenalised > 0.5
    assert cat_probability(presence_penalty=1.0) < unpenalised
    assert cat_probability(frequency_penalty=0.1) < unpenalised
    assert cat_probability(repeat_penalty=1.5) < unpenalised
    assert cat_probability(repeat_penalty=1.5, repeat_last_n=0) == unpenalised

    def kobold(**extra: Any) -> str:
        body = {"prompt": REPETITIVE, "max_length": 4, "temperature": 0, **extra}
        return str(post(hearth, "/api/v1/generate", body).json()["results"][0]["text"])

    assert kobold() == plain and "cat" not in kobold(rep_pen=3.0)
    # A window that ends before the repeats starts penalises nothing it would see.
    assert kobold(rep_pen=3.0, rep_pen_range=1) != kobold(rep_pen=3.0)

    ollama_client = ollama.Client(host=hearth.base_url)

    def ollama_text(**options: Any) -> str:
        answer = ollama_client.generate(
            model="any",
            prompt=REPETITIVE,
            raw=True,
            options={"num_predict": 4, **GREEDY, **options},
        )
        return answer.response

    assert ollama_text() == plain
    assert "cat" not in ollama_text(repeat_penalty=3.0)
    assert "cat" not in ollama_text(frequency_penalty=2.0)
    assert ollama_text(repeat_penalty=3.0, repeat_last_n=0) == plain  # 0: penalties off


# -- native /completion -----------------------------------------------------------------------


def stream_native(server: RunningServer, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    with httpx.stream(
        "POST", f"{server.base_url}/completion", json={**body, "stream": True}, timeout=120
    ) as answer:
        assert answer.status_code == 200
        for event in iter_sse(answer):
            if event.data:  # not a keep-alive comment
                yield json.loads(event.data)


def test_native_completion_fields_and_stream(hearth: RunningServer) -> None:
    native(hearth, {"prompt": PROMPT, "n_predict": 1})  # same cache state for the runs compared
    body = native(hearth, {"prompt": PROMPT, "n_predict": 5, **GREEDY, "return_tokens": True})
    assert body["stop"] is True and body["stop_type"] == "limit" and body["truncated"] is False
    assert body["timings"]["predicted_n"] == 5 == len(body["tokens"])
    tokenized = post(hearth, "/tokenize", {"content": PROMPT, "add_special": True}).json()
    prompt_tokens = tokenized["tokens"]
    assert body["tokens_evaluated"] == len(prompt_tokens)
    assert body["timings"]["prompt_n"] + body["timings"]["cache_n"] == len(prompt_tokens)
    assert body["generation_settings"]["n_predict"] == 5 and isinstance(body["has_new_line"], bool)

    chunks = list(stream_native(hearth, {"prompt": PROMPT, "n_predict": 5, **GREEDY}))
    assert chunks[-1]["stop"] is True and chunks[-1]["timings"]["predicted_n"] == 5
    assert "".join(chunk["content"] for chunk in chunks) == body["content"]
    assert [t for chunk in chunks[:-1] for t in chunk["tokens"]] == body["tokens"]

    # Token ids, mixed ids and text, and several prompts at once (answered as a list).
    same = native(hearth, {"prompt": prompt_tokens, "n_predict": 5, **GREEDY})
    assert same["content"] == body["content"]
    several = post(
        hearth,
        "/completion",
        {"prompt": [prompt_tokens, PROMPT, {"prompt_string": PROMPT}], "n_predict": 5, **GREEDY},
    ).json()
    assert [answer["content"] for answer in several] == [body["content"]] * 3
    assert [answer["index"] for answer in several] == [0, 1, 2]
    mixed = native(hearth, {"prompt": [prompt_tokens[0], PROMPT], "n_predict": 5, **GREEDY})
    assert mixed["content"] == body["content"]
    picked = native(
        hearth,
        {"prompt": PROMPT, "n_predict": 3, "response_fields": ["content", "timings/predicted_n"]},
    )
    assert set(picked) == {"content", "timings/predicted_n"} and picked["timings/predicted_n"] == 3
    stopped = native(hearth, {"prompt": "1, 2, 3, 4,", "n_predict": 20, "stop": [","], **GREEDY})
    assert stopped["stop_type"] == "word" and stopped["stopping_word"] == ","

    for bad in (
        {"prompt": {"prompt_string": "Hi", "multimodal_data": ["aGk="]}},
        {"prompt": [10**9]},
        {"prompt": ["a", "b"], "stream": True},
    ):
        refused = post(hearth, "/completion", bad)
        assert refused.status_code == 400 and refused.json()["error"]["message"], bad


def test_cache_prompt_false_reads_the_prompt_from_scratch(hearth: RunningServer) -> None:
    """llama-server's `cache_prompt: false`: no cached prefix is reused, so the same request
    runs in the same state each time and gives the same text (llama.cpp's
    test_consistent_result_same_seed); by default the prefix is reused."""
    body = {"prompt": PROMPT, "n_predict": 12, **GREEDY}
    native(hearth, body)  # the prompt is now cached
    assert native(hearth, body)["timings"]["cache_n"] > 0
    fresh = [native(hearth, {**body, "cache_prompt": False}) for _ in range(2)]
    assert [answer["timings"]["cache_n"] for answer in fresh] == [0, 0]
    assert fresh[0]["content"] == fresh[1]["content"]
    assert fresh[0]["timings"]["prompt_n"] == fresh[0]["tokens_evaluated"]


def test_slots_show_a_running_generation(hearth: RunningServer) -> None:
    slots = httpx.get(f"{hearth.base_url}/slots").json()
    assert [slot["id"] for slot in slots] == [0] and slots[0]["n_ctx"] == 4096
    stream = stream_native(hearth, {"prompt": PROMPT, "n_predict": 200, "ignore_eos": True})
    next(stream)  # generating now
    busy = httpx.get(f"{hearth.base_url}/slots").json()
    stream.close()
    assert busy[0]["is_processing"] is True


# -- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_images_are_refused_clearly_and_count_tokens_matches(
    hearth: RunningServer,
) -> None:
    claude = anthropic.Anthropic(base_url=hearth.base_url, api_key="unused")
    picture = base64.b64encode(png_bytes(4, 4, (200, 0, 0))).decode()
    image: Any = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": picture},
    }
    # a whole picture, to a model without a projector (test_vision_real.py: with one)
    with pytest.raises(anthropic.BadRequestError, match=r"image input is not supported.*--mmproj"):
        claude.messages.create(
            model="any",
            max_tokens=5,
            messages=[{"role": "user", "content": [image, {"type": "text", "text": "What?"}]}],
        )
    tool: Any = {
        "name": "weather",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    messages: Any = [{"role": "user", "content": "Is it raining in Oslo?"}]
    for tools in ([], [tool]):
        counted = claude.messages.count_tokens(
            model="any", system="Be brief.", messages=messages, tools=tools
        )
        sent = claude.messages.create(
            model="any", max_tokens=2, system="Be brief.", messages=messages, tools=tools
        )
        assert counted.input_tokens == sent.usage.input_tokens > 0


# -- batching ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_seeded_slots(seeded: RunningServer) -> RunningServer:
    """Two slots: the session's `seeded` server (tests/server/conftest.py; its --seed does not
    matter here), shared with the n-choices tests."""
    return seeded


def test_logprobs_bias_and_penalties_batch_with_others(two_seeded_slots: RunningServer) -> None:
    """A request with logprobs and one with logit_bias and penalties generate together:
    both slots are busy at once, and neither is sent to run alone."""
    printed_before = len(two_seeded_slots.output)
    first = stream_native(
        two_seeded_slots, {"prompt": PROMPT, "n_predict": 300, "ignore_eos": True, "n_probs": 2}
    )
    next(first)
    second_started = threading.Event()
    second_chunks: list[dict[str, Any]] = []

    def second() -> None:
        body = {
            "prompt": "Once upon a time",
            "n_predict": 300,
            "ignore_eos": True,
            "logit_bias": [[9999, -5]],
            "frequency_penalty": 0.5,
            "repeat_penalty": 1.2,
        }
        for chunk in stream_native(two_seeded_slots, body):
            second_chunks.append(chunk)
            second_started.set()
            if len(second_chunks) > 3:
                break

    worker = threading.Thread(target=second)
    worker.start()
    assert second_started.wait(120)
    slots = httpx.get(f"{two_seeded_slots.base_url}/slots").json()
    worker.join(120)
    first.close()
    assert [slot["is_processing"] for slot in slots] == [True, True]
    assert not any("Batching disabled" in line for line in two_seeded_slots.output[printed_before:])


def test_a_grammar_bound_request_generates_beside_a_plain_one(
    two_seeded_slots: RunningServer,
) -> None:
    """A grammar-bound request does not hold the engine alone (KoboldCpp's rule): a plain one
    sent while it generates is answered beside it."""
    printed_before = len(two_seeded_slots.output)
    bound = stream_native(
        two_seeded_slots, {"prompt": "Hi", "n_predict": 1500, "grammar": 'root ::= "b"+'}
    )
    next(bound)
    plain = post(two_seeded_slots, "/completion", {"prompt": "Hi", "n_predict": 2})
    slots = httpx.get(f"{two_seeded_slots.base_url}/slots").json()
    still_bound = next(bound)
    bound.close()
    assert plain.status_code == 200 and plain.json()["tokens_predicted"] == 2
    assert still_bound["content"] == "b" and not still_bound["stop"]
    # Answered while the grammar-bound one still generates (in turn, it would wait for that
    # one's 1500 tokens and find every slot idle).
    assert [slot["is_processing"] for slot in slots].count(True) == 1
    assert not any("Batching disabled" in line for line in two_seeded_slots.output[printed_before:])


# -- inputs that must not hurt the server ------------------------------------------------------


def test_hostile_grammars_and_biases_are_refused_or_survived(hearth: RunningServer) -> None:
    deep = "root ::= " + "(" * 5000 + '"a"' + ")" * 5000
    refused = post(hearth, "/completion", {"prompt": "Hi", "grammar": deep})
    assert refused.status_code == 400 and "nest" in refused.json()["error"]["message"]
    # Every token the grammar allows banned: a ban becomes a huge finite penalty there, so the
    # grammar still decides (a -inf ban would make llama.cpp's grammar throw and end the
    # process).
    banned = native(
        hearth,
        {"prompt": "Hi", "n_predict": 4, "grammar": 'root ::= "a"', "logit_bias": [["a", False]]},
    )
    assert banned["content"] == "a"
    text_key = native(hearth, {"prompt": "Hi", "n_predict": 1, "logit_bias": {"²": -1}})
    assert isinstance(text_key["content"], str)  # "²" is text, not a token id
    once = native(hearth, {"prompt": PROMPT, "n_predict": 0, "return_tokens": True})
    assert len(once["tokens"]) <= 1
    bad_choice = post(
        hearth,
        "/v1/messages/count_tokens",
        {"messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "bogus"}},
    )
    assert bad_choice.status_code == 400 and bad_choice.json()["type"] == "error"
    assert httpx.get(f"{hearth.base_url}/health").json() == {"status": "ok"}
