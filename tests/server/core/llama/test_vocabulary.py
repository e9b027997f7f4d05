"""A vocab-only load (issue 12's planning for models that are not loaded, work in progress):
the same tokens and chat template as the running server's full model."""

from __future__ import annotations

import httpx

from server.core.llama.card import ModelCard
from server.core.llama.loading.model import Vocabulary
from server.core.types import GenerationRequest
from server.models.files import resolve_model_path
from tests.support.servers import RunningServer

TEXT = "Hello, world! <start_of_turn>user\nNaïve café ☕ 1234567"


def test_a_vocab_only_load_tokenizes_as_the_loaded_model(hearth: RunningServer) -> None:
    vocabulary = Vocabulary.load_vocab_only(resolve_model_path(None))
    try:
        counted = httpx.post(f"{hearth.base_url}/api/extra/tokencount", json={"prompt": TEXT})
        ids = counted.json()["ids"]
        assert vocabulary.tokenize(TEXT, add_bos=vocabulary.add_bos, parse_special=True) == ids
        assert vocabulary.detokenize(ids, special=True).endswith(TEXT)
        assert vocabulary.chat_template.uses_model_template is False  # a base model
        assert vocabulary.metadata("general.architecture") == "gemma3"
    finally:
        vocabulary.free_vocabulary()


def test_a_model_card_plans_as_the_loaded_engine_does(hearth: RunningServer) -> None:
    card = ModelCard.load(resolve_model_path(None), context_size=4096, slots=1)
    try:
        counted = httpx.post(f"{hearth.base_url}/api/extra/tokencount", json={"prompt": TEXT})
        request = GenerationRequest(request_id="r", prompt=TEXT, max_tokens=16)
        assert card.count_prompt_tokens(request) == len(counted.json()["ids"])
        assert card.tokenize(TEXT) == counted.json()["ids"]
        card.check_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    finally:
        card.close()


def test_the_card_and_the_engine_name_the_same_end_tokens(hearth: RunningServer) -> None:
    """llama-server's `ignore_eos` report: the end-of-generation tokens, from a vocab-only
    card as from the loaded engine (Gemma 3: <eos> and <end_of_turn> among them)."""
    card = ModelCard.load(resolve_model_path(None), context_size=4096, slots=1)
    try:
        body = {"prompt": "Hi", "n_predict": 1, "ignore_eos": True}
        answer = httpx.post(f"{hearth.base_url}/completion", json=body, timeout=60).json()
        reported = [entry["token"] for entry in answer["generation_settings"]["logit_bias"]]
        assert reported == list(card.end_tokens)
        assert {1, 106} <= set(card.end_tokens)  # <eos>, <end_of_turn>
        assert {entry["bias"] for entry in answer["generation_settings"]["logit_bias"]} == {None}
    finally:
        card.close()
