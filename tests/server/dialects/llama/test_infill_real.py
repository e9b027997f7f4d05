"""/infill over real HTTP on a tiny code model with FIM tokens (tests/support/fim_gguf.py):
the prompt the server builds (the model's FIM tokens by role, the other files, the cursor's
text), whole and streamed; and llama-server's 501 on the bundled model, which has none.
How the prompt is cut to fit, the suffix-first order and a model without file tokens:
tests/server/dialects/llama/test_infill_prompt.py."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.fim_gguf import character_token
from tests.support.servers import RunningServer

CODE = {"input_prefix": "ab", "input_suffix": "cd", "prompt": "x", "n_predict": 2}
# The prompt with its special tokens written out: the other files first (the repository,
# each file under its name, then the current file's separator), BOS, then prefix, the typed
# text, suffix and middle, as llama-server builds it. SentencePiece puts a space before the
# text after a special token.
EXPECTED = (
    "<|repo_name|> myproject\n<|file_sep|> util.c\n zz<|file_sep|> filename\n"
    "<s><|fim_prefix|> ab x<|fim_suffix|> cd<|fim_middle|>"
)
EXTRA = [{"filename": "util.c", "text": "zz"}]


def post(server: RunningServer, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{server.base_url}/infill", json=body, timeout=60)


def test_the_prompt_has_the_model_s_fim_tokens_around_the_code(fim_server: RunningServer) -> None:
    response = post(fim_server, {**CODE, "input_extra": EXTRA})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["prompt"] == EXPECTED
    assert answer["truncated"] is False


def test_without_other_files_only_the_current_file_is_named(fim_server: RunningServer) -> None:
    answer = post(fim_server, CODE).json()
    assert answer["prompt"] == (
        "<|repo_name|> myproject\n<|file_sep|> filename\n"
        "<s><|fim_prefix|> ab x<|fim_suffix|> cd<|fim_middle|>"
    )


def test_a_file_without_a_name_is_tmp_and_token_ids_go_in_as_given(
    fim_server: RunningServer,
) -> None:
    prefix_ids = [character_token(character) for character in " ab"]
    body = {**CODE, "input_prefix": prefix_ids, "input_extra": [{"text": "zz"}]}
    answer = post(fim_server, body).json()
    assert "<|file_sep|> tmp\n zz" in answer["prompt"]
    assert "<|fim_prefix|> ab x<|fim_suffix|>" in answer["prompt"]


def test_streamed_the_last_event_carries_the_prompt(fim_server: RunningServer) -> None:
    with httpx.stream(
        "POST", f"{fim_server.base_url}/infill", json={**CODE, "stream": True}, timeout=60
    ) as response:
        assert response.status_code == 200
        events = [
            json.loads(line[len("data: ") :])
            for line in response.iter_lines()
            if line.startswith("data: ")
        ]
    assert events[-1]["stop"] is True
    assert events[-1]["prompt"].endswith("<s><|fim_prefix|> ab x<|fim_suffix|> cd<|fim_middle|>")


@pytest.mark.parametrize(
    "change",
    [
        {"input_extra": [{}]},
        {"input_extra": [{"filename": 123, "text": "abc"}]},
        {"input_extra": [{"filename": "a", "text": 456}]},
        {"input_extra": {"text": "abc"}},
        {"prompt": ["x"]},
        {"input_prefix": [10**9]},
    ],
)
def test_a_malformed_body_is_a_400(fim_server: RunningServer, change: dict[str, object]) -> None:
    response = post(fim_server, {**CODE, **change})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_body_without_prefix_or_suffix_is_a_400(fim_server: RunningServer) -> None:
    for missing in ("input_prefix", "input_suffix"):
        body = {key: value for key, value in CODE.items() if key != missing}
        assert post(fim_server, body).status_code == 400


def test_a_model_without_fim_tokens_gets_llama_server_s_501(hearth: RunningServer) -> None:
    response = post(hearth, CODE)
    assert response.status_code == 501
    error = response.json()["error"]
    assert error["type"] == "not_supported_error"
    assert error["message"] == (
        "Infill is not supported by this model: prefix token is missing. "
        "suffix token is missing. middle token is missing."
    )
