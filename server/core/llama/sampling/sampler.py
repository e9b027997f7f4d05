"""The llama.cpp sampler chain for one request: grammar, logit bias and banned end tokens,
penalties, then greedy or top-k / top-p / min-p / temperature / seeded draw; and sampling that
also reports token probabilities, read from the same logits (no second decode)."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import llama_cpp as llama
import numpy as np

from server.core.llama.sampling.json_grammar import ConverterChangedError, json_schema_gbnf
from server.core.scheduling.engine import EngineError
from server.core.types import SamplingParams, TokenChoice, TokenLogprob

# llama.cpp divides or multiplies logits by the repetition penalty and the temperature, and
# subtracts the presence penalty. A penalty that is 0 as a float32 (5e-324 is) makes the
# grammar's -inf logits NaN, and values past these bounds leave float32's range: either lets a
# sampler pick a token the grammar forbids, and the grammar's C++ exception ends the process.
# Inside them every value behaves as asked; outside, the nearest bound does the same job.
_PENALTY_RANGE = (1e-6, 1e6)
_PRESENCE_LIMIT = 1e6
_MIN_TEMPERATURE = 1e-6  # below it the draw is greedy, which is what such a value means
# A bias this large either way decides the token by itself; clamping keeps the arithmetic
# finite (an infinite positive bias on two tokens would make their logits NaN).
_BIAS_LIMIT = 1e6

# One token is enough: " yes"/" no" style pieces are single tokens in every common vocabulary.
YES_NO_GRAMMAR = 'root ::= "yes" | "no" | "Yes" | "No"'


def schema_grammar(schema: dict[str, Any] | None) -> str | None:
    """The grammar binding a reply to `schema`, its strings valid JSON (json_grammar.py)."""
    if schema is None:
        return None
    try:
        return json_schema_gbnf(schema)
    except ConverterChangedError:
        raise  # the server's fault, not the schema's: a 500, never a 400
    except Exception as exc:  # the converter raises assorted errors on unsupported schemas
        raise EngineError(f"cannot turn this JSON schema into a grammar: {exc}") from exc


# llama.cpp's GBNF parser recurses once per nesting level and per chained rule, with no limit
# of its own: a deep enough grammar overflows the stack and ends the process. Grammars people
# write (and those made from JSON schemas) stay far below these.
MAX_GRAMMAR_CHARS = 256 * 1024
MAX_GRAMMAR_NESTING = 128
MAX_GRAMMAR_RULES = 4096


def grammar_shape_problem(grammar: str) -> str | None:
    """Why `grammar` must not reach llama.cpp's parser (too long, nested or many rules)."""
    if len(grammar) > MAX_GRAMMAR_CHARS:
        return f"it is longer than {MAX_GRAMMAR_CHARS} characters"
    if grammar.count("::=") > MAX_GRAMMAR_RULES:
        return f"it has more than {MAX_GRAMMAR_RULES} rules"
    depth = deepest = 0
    quote: str | None = None  # inside "..." or [...]: brackets there are characters
    escaped = False
    for char in grammar:
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
        elif char == '"':
            quote = '"'
        elif char == "[":
            quote = "]"
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    if deepest > MAX_GRAMMAR_NESTING:
        return f"its parentheses nest deeper than {MAX_GRAMMAR_NESTING} levels"
    return None


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
        if sampling.logit_bias:
            # Before the grammar, and never -inf with one: if a client banned every token the
            # grammar allows, the draw would pick a forbidden one and the grammar's accept
            # would throw a C++ exception, ending the process. A huge finite penalty still
            # bans, but the grammar's own -inf has the last word.
            bias = self._logit_bias(sampling.logit_bias, finite=grammar is not None)
            llama.llama_sampler_chain_add(chain, bias)
        if grammar is not None:
            # Over the whole vocabulary, before the truncating samplers: they then only ever
            # see tokens the grammar allows, so sampling can never get stuck.
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
        return self._logit_bias([(token, -math.inf) for token in self._end_tokens])

    def _logit_bias(self, pairs: Any, finite: bool = False) -> Any:
        valid = [(t, b) for t, b in pairs if 0 <= t < self._n_vocab]
        biases = (llama.llama_logit_bias * len(valid))()
        for slot, (token, bias) in zip(biases, valid, strict=True):
            slot.token = token
            banned = math.isinf(bias) and bias < 0 and not finite
            slot.bias = bias if banned else _clamp(bias, _BIAS_LIMIT)
        return llama.llama_sampler_init_logit_bias(self._n_vocab, len(biases), biases)

    def _penalties(self, sampling: SamplingParams) -> Any:
        if (
            sampling.rep_pen == 1.0
            and sampling.presence_penalty == 0.0
            and sampling.frequency_penalty == 0.0
        ):
            return None
        last_n = sampling.rep_pen_range if sampling.rep_pen_range > 0 else self._n_ctx
        repeat = min(max(sampling.rep_pen, _PENALTY_RANGE[0]), _PENALTY_RANGE[1])
        presence = _clamp(sampling.presence_penalty, _PRESENCE_LIMIT)
        frequency = _clamp(sampling.frequency_penalty, _PRESENCE_LIMIT)
        return llama.llama_sampler_init_penalties(
            self._n_vocab, last_n, repeat, frequency, presence
        )

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


def plain_greedy(sampling: SamplingParams, grammar: str | None) -> bool:
    """Whether `build` makes a chain of llama.cpp's greedy sampler alone (no logit bias,
    grammar, banned end tokens or penalties): then a row's token is simply its first largest
    logit (`greedy_token`)."""
    return (
        sampling.temperature < _MIN_TEMPERATURE
        and not sampling.logit_bias
        and grammar is None
        and not sampling.ban_eos
        and sampling.rep_pen == 1.0
        and sampling.presence_penalty == 0.0
        and sampling.frequency_penalty == 0.0
    )


def greedy_token(logits: Any, n_vocab: int) -> int:
    """The token of the first largest of `n_vocab` logits: what a chain of the greedy sampler
    alone picks (it too keeps the first of equal maxima). Read in place with numpy because
    `llama_sampler_sample` first copies the whole vocabulary into a candidate array: measured
    on the bundled model's 262,144 tokens, 0.31 ms a row against 0.08, which is 4% of a
    speculative decode's time per token. The greedy sampler keeps no state, so nothing is
    lost by not calling `accept`."""
    return int(np.ctypeslib.as_array(logits, shape=(n_vocab,)).argmax())


def _clamp(value: float, limit: float) -> float:
    return min(max(value, -limit), limit)


# llama_token_data {llama_token id; float logit; float p;}, as numpy sees it.
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


def sample_with_logprobs(
    chain: Any,
    logits: Any,
    n_vocab: int,
    top_n: int,
    post_sampling: bool,
    piece: Callable[[int], bytes],
) -> tuple[int, TokenLogprob]:
    """Sample the next token as `llama_sampler_sample` does, and say how likely it was.

    llama.cpp's one-call sampling keeps its candidate list to itself, so this runs the chain
    over a candidate array of our own (the same samplers, the same order, then `accept`), and
    reads the probabilities from the logits already computed: the model's own distribution
    (log-softmax over the whole vocabulary, what OpenAI's `logprobs` mean), or with
    `post_sampling` the one the draw really used (the candidates left after top-k/top-p/...,
    llama-server's `post_sampling_probs`, then plain probabilities)."""
    raw = np.ctypeslib.as_array(logits, shape=(n_vocab,)).astype(np.float32)
    candidates = np.empty(n_vocab, dtype=_TOKEN_DATA)
    candidates["id"] = np.arange(n_vocab, dtype=np.int32)
    candidates["logit"] = raw
    candidates["p"] = 0.0
    array = llama.llama_token_data_array(
        data=candidates.ctypes.data_as(ctypes.POINTER(llama.llama_token_data)),
        size=n_vocab,
        selected=-1,
        sorted=False,
    )
    llama.llama_sampler_apply(chain, ctypes.byref(array))
    if not 0 <= array.selected < array.size:
        raise EngineError("the sampler chain selected no token")
    token = int(candidates["id"][array.selected])
    llama.llama_sampler_accept(chain, token)
    if post_sampling:
        kept = candidates[: array.size]
        finite = kept[np.isfinite(kept["logit"])]
        ids, values = _softmax(finite["id"], finite["logit"], log=False)
        chosen = float(values[ids == token][0]) if np.any(ids == token) else 1.0
        top = _top(ids, values, top_n, keep=lambda v: v > 0.0)
    else:
        ids, values = _softmax(np.arange(n_vocab, dtype=np.int32), raw, log=True)
        chosen = float(values[token])
        top = _top(ids, values, top_n, keep=math.isfinite)
    choices = tuple(TokenChoice(int(i), piece(int(i)), float(v)) for i, v in top)
    return token, TokenLogprob(TokenChoice(token, piece(token), chosen), choices)


def _softmax(ids: Any, logits: Any, *, log: bool) -> tuple[Any, Any]:
    """(ids, probabilities or log-probabilities) of `logits`, in float64 for accuracy."""
    values = logits.astype(np.float64)
    values -= values.max()
    log_sum = math.log(float(np.exp(values).sum()))
    values -= log_sum
    return ids, values if log else np.exp(values)


def _top(ids: Any, values: Any, n: int, keep: Callable[[float], bool]) -> list[tuple[int, float]]:
    if n <= 0 or len(ids) == 0:
        return []
    n = min(n, len(ids))
    best = np.argpartition(-values, n - 1)[:n]
    best = best[np.argsort(-values[best], kind="stable")]
    return [(int(ids[i]), float(values[i])) for i in best if keep(float(values[i]))]
