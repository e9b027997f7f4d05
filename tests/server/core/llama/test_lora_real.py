"""LoRA adapters on the real model, loaded in this process: an adapter written for the bundled
model (tests/support/lora_gguf.py) moves the next token's log-probabilities clearly, scale 0 is
the model alone, and the scales set on the context follow each request; a KV cache computed
under other scales is never reused (the slot's own, nor a state in the prompt cache); a file
that is not a LoRA adapter for this model is refused at load, saying why."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp as llama
import numpy as np
import pytest

from server.core.llama.engine import LlamaCppEngine
from server.core.llama.loading.model import LoadedModel
from server.core.scheduling.engine import EngineError
from server.core.types import GenerationOutcome, GenerationRequest, SamplingParams, TokenEvent
from server.process.load_settings import load_settings
from server.settings.config import HearthSettings
from tests.support.logits import LIKELY, SHAPE_TOLERANCE
from tests.support.lora_gguf import write_lora

pytestmark = pytest.mark.model

TEXT = "The lighthouse keeper wrote in his log every night about the ships and the sea. " * 4
SAME = 1e-3  # one configuration read twice, in the same decode shape: the same numbers


@dataclass
class Held:
    """What `LoraAdapters.turn` groups: anything with a request."""

    request: GenerationRequest


def load(bundled: Path, **values: Any) -> LoadedModel:
    settings = HearthSettings(contextsize=1024, threads=2, **values)
    return LoadedModel.load(bundled, load_settings(settings))


def next_logprobs(loaded: LoadedModel, lora: tuple[tuple[int, float], ...] | None) -> Any:
    """The next token's log-probabilities after TEXT, read from scratch at these scales
    (None: the server's), set on the context as a decode of the engine sets them."""
    request = loaded.adapters.resolved(GenerationRequest("read", TEXT, 1, lora=lora))
    assert loaded.adapters.turn([Held(request)])[0].request is request
    llama.llama_memory_seq_rm(loaded.memory, 0, -1, -1)
    ids = loaded.tokenize(TEXT, add_bos=True, parse_special=True)
    tokens = (llama.llama_token * len(ids))(*ids)
    assert llama.llama_decode(loaded.context, llama.llama_batch_get_one(tokens, len(ids))) == 0
    logits = np.ctypeslib.as_array(
        llama.llama_get_logits_ith(loaded.context, -1), (loaded.n_vocab,)
    )
    shifted = logits - logits.max()
    return (shifted - np.log(np.exp(shifted).sum())).copy()


def difference(one: Any, other: Any) -> float:
    """The largest change in log-probability among the tokens either finds likely."""
    likely = (one > LIKELY) | (other > LIKELY)
    return float(np.abs(one[likely] - other[likely]).max())


@pytest.fixture(scope="module")
def alone(bundled: Path) -> Any:
    loaded = load(bundled)
    try:
        return next_logprobs(loaded, None)
    finally:
        loaded.close()


@pytest.fixture(scope="module")
def with_adapter(bundled: Path, lora_adapter: Path) -> Iterator[LoadedModel]:
    loaded = load(bundled, lora=[str(lora_adapter)])
    yield loaded
    loaded.close()


def test_an_adapter_moves_the_logits_and_scale_0_is_the_model_alone(
    alone: Any, with_adapter: LoadedModel
) -> None:
    full = next_logprobs(with_adapter, None)  # --lora's scale: 1
    assert int(full.argmax()) != int(alone.argmax())  # another likeliest token
    assert difference(full, alone) > 2.0
    assert difference(next_logprobs(with_adapter, ((0, 0.0),)), alone) < SAME
    assert difference(next_logprobs(with_adapter, ()), alone) < SAME  # an adapter not named
    half = difference(next_logprobs(with_adapter, ((0, 0.5),)), alone)
    assert 0.1 < half < difference(full, alone)
    # Back to scale 1 from the others: the context follows every change.
    assert difference(next_logprobs(with_adapter, ((0, 1.0),)), full) < SAME
    assert difference(next_logprobs(with_adapter, ((0, -1.0),)), alone) > 0.5


def test_the_servers_scales_are_read_when_a_request_starts(
    alone: Any, with_adapter: LoadedModel
) -> None:
    scales = with_adapter.adapters._settings.scales  # the list POST /lora-adapters changes
    try:
        scales[:] = [0.0]
        assert difference(next_logprobs(with_adapter, None), alone) < SAME
        request = with_adapter.adapters.resolved(GenerationRequest("r", "x", 1))
        assert request.lora == ()  # resolved: scale 0 is no adapter
    finally:
        scales[:] = [1.0]
    resolved = with_adapter.adapters.resolved(GenerationRequest("r", "x", 1, lora=((9, 1.0),)))
    assert resolved.lora == ()  # an id this model lacks is ignored, as in llama-server


def generate(engine: LlamaCppEngine, lora: tuple[tuple[int, float], ...] | None) -> Any:
    """How many prompt tokens a greedy one-token reply to TEXT reused, and its token's five
    likeliest alternatives with their log-probabilities."""
    request = GenerationRequest(
        "gen", TEXT, 1, sampling=SamplingParams(temperature=0.0), logprobs=5, lora=lora
    )
    top: dict[int, float] = {}
    for event in engine.generate(request, threading.Event()):
        if isinstance(event, TokenEvent) and event.logprobs:
            top = {choice.token_id: choice.logprob for choice in event.logprobs[0].top}
        if isinstance(event, GenerationOutcome):
            return event.reused_prompt_tokens, top
    raise AssertionError("no outcome")


def agree(one: dict[int, float], other: dict[int, float]) -> bool:
    """Two reads of one configuration, cut into decodes differently (a reused prefix): the
    likely tokens within the batch-shape tolerance. A KV cache made under other scales puts
    them 2.7 to 6 apart on this adapter."""
    likeliest = max(one, key=one.__getitem__)
    likely = [token for token in one.keys() & other.keys() if one[token] > LIKELY]
    close = all(abs(one[token] - other[token]) < SHAPE_TOLERANCE for token in likely)
    return likeliest in other and close


def test_a_cache_made_under_other_scales_is_never_reused(bundled: Path, lora_adapter: Path) -> None:
    settings = HearthSettings(contextsize=1024, threads=2, lora=[str(lora_adapter)])
    engine = LlamaCppEngine.load(bundled, load_settings(settings))
    try:
        fresh, full = generate(engine, ((0, 1.0),))
        again, full_again = generate(engine, ((0, 1.0),))
        assert fresh == 0 and again > 60  # the same scales reuse the slot's cache
        assert agree(full, full_again)
        other, base = generate(engine, ((0, 0.0),))
        assert other == 0  # read again under the other scales
        # The server's scales (1): the slot holds the scale-0 cache, the prompt cache the
        # scale-1 state it saved when the slot was emptied, which is restored.
        restored, full_restored = generate(engine, None)
        assert restored > 60 and agree(full, full_restored)
        back, base_again = generate(engine, ())  # no adapter: the scale-0 state is restored
        assert back > 60 and agree(base, base_again)
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda folder, base: folder / "nowhere.gguf", "no such file"),
        (lambda folder, base: base, "not a LoRA adapter (general.type 'model'"),
        (
            lambda folder, base: write_lora(folder / "llama.gguf", base, architecture="llama"),
            "a LoRA adapter for llama models, and gemma-3-270m-q4_k_m.gguf is a gemma3 model",
        ),
        (
            lambda folder, base: write_lora(folder / "narrow.gguf", base, shrink=64),
            "llama.cpp could not apply it to gemma-3-270m-q4_k_m.gguf (its tensors do not match",
        ),
    ],
)
def test_a_file_that_is_no_lora_for_this_model_is_refused_saying_why(
    bundled: Path, lora_adapter: Path, tmp_path: Path, make: Any, said: str
) -> None:
    path = make(tmp_path, bundled)
    with pytest.raises(EngineError) as refused:
        load(bundled, lora=[str(lora_adapter), str(path)])  # the first one loads, then is freed
    message = str(refused.value)
    assert message.startswith(f"--lora {path}: ") and said in message and "\n" not in message
