"""The llama.cpp sampler chain for one request: grammar, banned end tokens, penalties, then
greedy or top-k / top-p / min-p / temperature / seeded draw."""

from __future__ import annotations

import json
from typing import Any

import llama_cpp as llama
from llama_cpp.llama_grammar import json_schema_to_gbnf

from server.core.engine import EngineError
from server.core.types import SamplingParams

# llama.cpp divides or multiplies logits by the repetition penalty and the temperature, and
# subtracts the presence penalty. A penalty that is 0 as a float32 (5e-324 is) makes the
# grammar's -inf logits NaN, and values past these bounds leave float32's range: either lets a
# sampler pick a token the grammar forbids, and the grammar's C++ exception ends the process.
# Inside them every value behaves as asked; outside, the nearest bound does the same job.
_PENALTY_RANGE = (1e-6, 1e6)
_PRESENCE_LIMIT = 1e6
_MIN_TEMPERATURE = 1e-6  # below it the draw is greedy, which is what such a value means

# One token is enough: " yes"/" no" style pieces are single tokens in every common vocabulary.
YES_NO_GRAMMAR = 'root ::= "yes" | "no" | "Yes" | "No"'


def schema_grammar(schema: dict[str, Any] | None) -> str | None:
    if schema is None:
        return None
    try:
        return str(json_schema_to_gbnf(json.dumps(schema)))
    except Exception as exc:  # the converter raises assorted errors on unsupported schemas
        raise EngineError(f"cannot turn this JSON schema into a grammar: {exc}") from exc


def check_grammar(vocab: Any, grammar: str) -> bool:
    """Whether llama.cpp accepts `grammar` (it answers a null sampler otherwise)."""
    sampler = llama.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        return False
    llama.llama_sampler_free(sampler)
    return True


class SamplerFactory:
    """Builds sampler chains for one model's vocabulary and context."""

    def __init__(self, vocab: Any, n_vocab: int, n_ctx: int, end_tokens: list[int]) -> None:
        self._vocab = vocab
        self._n_vocab = n_vocab
        self._n_ctx = n_ctx
        self._end_tokens = end_tokens

    def build(self, sampling: SamplingParams, prompt: list[int], grammar: str | None) -> Any:
        chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
        if grammar is not None:
            # First in the chain, over the whole vocabulary: later samplers then only ever see
            # tokens the grammar allows, so sampling can never get stuck.
            constraint = llama.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
            if not constraint:
                llama.llama_sampler_free(chain)
                raise EngineError("llama.cpp rejected the grammar for this request")
            llama.llama_sampler_chain_add(chain, constraint)
        if sampling.ban_eos and grammar is None and self._end_tokens:
            llama.llama_sampler_chain_add(chain, self._end_token_ban())
        penalties = self._penalties(sampling)
        if penalties is not None:
            llama.llama_sampler_chain_add(chain, penalties)
        self._add_draw(chain, sampling)
        if penalties is not None:
            # Repetition penalty looks back over the prompt too, as in KoboldCpp. Only the
            # penalties sampler sees the prompt: a grammar fed tokens it does not allow throws
            # a C++ exception, which ends the whole process.
            for token in prompt[-(sampling.rep_pen_range or len(prompt)) :]:
                llama.llama_sampler_accept(penalties, token)
        return chain

    def _end_token_ban(self) -> Any:
        biases = (llama.llama_logit_bias * len(self._end_tokens))()
        for slot, token in zip(biases, self._end_tokens, strict=True):
            slot.token = token
            slot.bias = float("-inf")
        return llama.llama_sampler_init_logit_bias(self._n_vocab, len(biases), biases)

    def _penalties(self, sampling: SamplingParams) -> Any:
        if sampling.rep_pen == 1.0 and sampling.presence_penalty == 0.0:
            return None
        last_n = sampling.rep_pen_range if sampling.rep_pen_range > 0 else self._n_ctx
        repeat = min(max(sampling.rep_pen, _PENALTY_RANGE[0]), _PENALTY_RANGE[1])
        presence = min(max(sampling.presence_penalty, -_PRESENCE_LIMIT), _PRESENCE_LIMIT)
        return llama.llama_sampler_init_penalties(self._n_vocab, last_n, repeat, 0.0, presence)

    @staticmethod
    def _add_draw(chain: Any, sampling: SamplingParams) -> None:
        add = llama.llama_sampler_chain_add
        if sampling.temperature < _MIN_TEMPERATURE:
            add(chain, llama.llama_sampler_init_greedy())
            return
        if sampling.top_k > 0:
            add(chain, llama.llama_sampler_init_top_k(sampling.top_k))
        if sampling.top_p < 1.0:
            add(chain, llama.llama_sampler_init_top_p(sampling.top_p, 1))
        if sampling.min_p > 0.0:
            add(chain, llama.llama_sampler_init_min_p(sampling.min_p, 1))
        add(chain, llama.llama_sampler_init_temp(sampling.temperature))
        add(chain, llama.llama_sampler_init_dist(sampling.seed & 0xFFFFFFFF))
