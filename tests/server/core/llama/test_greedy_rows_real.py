"""Greedy requests read each row's token with numpy (sampler.greedy_token) instead of through
llama.cpp's sampler call, which copies the whole vocabulary first: the token is the one the
greedy sampler picks, on every row of a real decode and on equal maxima, and only requests
whose chain is the greedy sampler alone take that path."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp as llama
import numpy as np
import pytest

from server.core.llama import engine as engine_module
from server.core.llama.engine import LlamaCppEngine
from server.core.llama.loading.model import LoadedModel
from server.core.llama.sampling.sampler import greedy_token, plain_greedy
from server.core.types import GenerationOutcome, GenerationRequest, SamplingParams, TokenEvent
from server.process.load_settings import load_settings
from server.settings.config import HearthSettings

TEXT = "The lighthouse keeper wrote in his log every night about the ships and the sea."
GREEDY = SamplingParams(temperature=0.0)


def chain_pick(values: Any) -> int:
    """What llama.cpp's greedy sampler picks from `values` (float32 logits)."""
    n_vocab = len(values)
    data = (llama.llama_token_data * n_vocab)()
    for token, logit in enumerate(values):
        data[token] = llama.llama_token_data(token, float(logit), 0.0)
    array = llama.llama_token_data_array(data=data, size=n_vocab, selected=-1, sorted=False)
    sampler = llama.llama_sampler_init_greedy()
    try:
        llama.llama_sampler_apply(sampler, ctypes.byref(array))
    finally:
        llama.llama_sampler_free(sampler)
    return int(data[array.selected].id)


def test_equal_maxima_give_the_first_as_the_greedy_sampler_does() -> None:
    values = np.array([0.5, 3.0, -1.0, 3.0, 3.0, 2.0], dtype=np.float32)
    pointer = values.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    assert greedy_token(pointer, len(values)) == chain_pick(values) == 1


@pytest.mark.parametrize(
    ("sampling", "grammar", "plain"),
    [
        (GREEDY, None, True),
        (SamplingParams(temperature=0.7), None, False),
        (GREEDY, 'root ::= "yes"', False),
        (SamplingParams(temperature=0.0, rep_pen=1.1), None, False),
        (SamplingParams(temperature=0.0, presence_penalty=0.5), None, False),
        (SamplingParams(temperature=0.0, frequency_penalty=0.5), None, False),
        (SamplingParams(temperature=0.0, ban_eos=True), None, False),
        (SamplingParams(temperature=0.0, logit_bias=((5, 2.0),)), None, False),
    ],
)
def test_only_a_chain_of_the_greedy_sampler_alone_is_plain_greedy(
    sampling: SamplingParams, grammar: str | None, plain: bool
) -> None:
    assert plain_greedy(sampling, grammar) is plain


@pytest.mark.model
def test_every_row_of_a_real_decode_gives_the_greedy_samplers_token(bundled: Path) -> None:
    # Speculation on: the context then has room for a draft's rows of logits (model.py).
    settings = HearthSettings(contextsize=512, threads=2, spec_type="ngram-simple")
    loaded = LoadedModel.load(bundled, load_settings(settings))
    try:
        ids = loaded.tokenize(TEXT, add_bos=True, parse_special=True)
        batch = llama.llama_batch_init(len(ids), 0, 1)
        for row, token in enumerate(ids):  # every row's logits: a draft's rows read alike
            batch.token[row], batch.pos[row], batch.n_seq_id[row] = token, row, 1
            batch.seq_id[row][0], batch.logits[row] = 0, True
        batch.n_tokens = len(ids)
        assert llama.llama_decode(loaded.context, batch) == 0
        chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
        llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_greedy())
        for row in range(len(ids)):
            logits = llama.llama_get_logits_ith(loaded.context, row)
            picked = llama.llama_sampler_sample(chain, loaded.context, row)
            assert greedy_token(logits, loaded.n_vocab) == picked, row
        llama.llama_sampler_free(chain)
        llama.llama_batch_free(batch)
    finally:
        loaded.close()


@pytest.fixture(scope="module")
def ngram_engine(bundled: Path) -> Iterator[LlamaCppEngine]:
    settings = HearthSettings(contextsize=1024, threads=2, spec_type="ngram-simple")
    loaded = LlamaCppEngine.load(bundled, load_settings(settings))
    yield loaded
    loaded.close()


def reply(ngram_engine: LlamaCppEngine, sampling: SamplingParams) -> str:
    """A reply read from scratch (nothing reused), so two runs decode the same shapes."""
    request = GenerationRequest("greedy", TEXT * 3, 48, sampling, reuse_cache=False)
    events = list(ngram_engine.generate(request, threading.Event()))
    assert isinstance(events[-1], GenerationOutcome)
    assert events[-1].draft_accepted > 0  # the repeated text drafted: several rows a decode
    return "".join(event.text for event in events if isinstance(event, TokenEvent))


@pytest.mark.model
def test_a_greedy_request_skips_the_sampler_call_and_writes_the_same_reply(
    ngram_engine: LlamaCppEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    sample = llama.llama_sampler_sample

    def counted(*args: Any) -> int:
        calls.append(1)
        return int(sample(*args))

    monkeypatch.setattr(llama, "llama_sampler_sample", counted)
    fast = reply(ngram_engine, GREEDY)
    assert calls == []
    # The same request through the sampler chain (as before): the same text, token for token.
    monkeypatch.setattr(engine_module, "plain_greedy", lambda *_: False)
    slow = reply(ngram_engine, GREEDY)
    assert calls and slow == fast
