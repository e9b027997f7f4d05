"""llama-server's answer shapes and figures, which two dialects carry.

Its native /completion answer and stream (server/dialects/llama/) are made of these, and so are
the extras llama-server adds to its OpenAI answers (server/dialects/openai/): `timings` on the
last chunk (on every chunk with `timings_per_token`), and with `verbose: true` the native answer
as `__verbose`. Here, not in either dialect package, so neither imports the other.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, runtime_checkable

from typing_extensions import TypedDict

from server.core.types import FinishReason, GenerationOutcome, GenerationRequest, Progress
from server.dialects.chat.answers import ChatAnswer
from server.dialects.chat.plans import ChatPlan


class ProbabilityEntry(TypedDict, total=False):
    id: int
    token: str
    bytes: list[int]
    logprob: float  # the model's own (default)
    prob: float  # with post_sampling_probs


class TokenProbabilities(ProbabilityEntry, total=False):
    top_logprobs: list[ProbabilityEntry]
    top_probs: list[ProbabilityEntry]


class PromptProgress(TypedDict):
    """llama-server's `prompt_progress`: the prompt's tokens, those taken from the cache, those
    in the context so far (the cached ones too) and the milliseconds since the request began."""

    total: int
    cache: int
    processed: int
    time_ms: int


def prompt_progress(progress: Progress) -> PromptProgress:
    """llama-server's `prompt_progress` for a request that asked (`return_progress`)."""
    return {
        "total": progress.prompt_total,
        "cache": progress.cached,
        "processed": progress.prompt_done,
        "time_ms": round(progress.seconds * 1000),  # an integer, as llama-server's
    }


class PredictedTimings(TypedDict):
    """The generation's figures so far (llama-server's `timings_per_token`)."""

    predicted_n: int
    predicted_ms: float
    predicted_per_token_ms: float
    predicted_per_second: float


class Timings(PredictedTimings):
    """A finished generation's figures: its prompt's and its reply's."""

    cache_n: int
    prompt_n: int
    prompt_ms: float
    prompt_per_token_ms: float
    prompt_per_second: float
    # Speculative decoding's draft tokens and those accepted, when it drafted any.
    draft_n: NotRequired[int]
    draft_n_accepted: NotRequired[int]


class NativeChunk(TypedDict):
    """One event of a /completion stream before the last."""

    index: int
    content: str
    tokens: list[int]
    stop: Literal[False]
    id_slot: int
    tokens_predicted: int
    completion_probabilities: NotRequired[list[TokenProbabilities]]
    prompt_progress: NotRequired[PromptProgress]  # with return_progress, while it is read


class NativeCompletion(TypedDict):
    """/completion's whole answer, and the last event of its stream (`content` empty)."""

    index: int
    content: str
    tokens: list[int]
    id_slot: int
    stop: Literal[True]
    model: str
    tokens_predicted: int
    tokens_evaluated: int
    generation_settings: dict[str, Any]
    prompt: str
    has_new_line: bool
    truncated: bool
    stop_type: str
    stopping_word: str
    tokens_cached: int
    timings: Timings
    completion_probabilities: NotRequired[list[TokenProbabilities]]


def predicted_timings(tokens: int, seconds: float) -> PredictedTimings:
    """The reply's figures, its rates over decode steps as llama-server's: the first token
    comes from the prompt's last batch and costs no step (`seconds` start after it), so one
    token makes no rate at all and sixteen are fifteen steps."""
    ms = seconds * 1000
    steps = max(tokens - 1, 0)
    return {
        "predicted_n": tokens,
        "predicted_ms": ms,
        "predicted_per_token_ms": ms / steps if steps and ms > 0 else 0.0,
        "predicted_per_second": 1e3 / ms * steps if ms > 0 else 0.0,
    }


class PromptTimings(TypedDict):
    """The prompt's figures: tokens taken from the cache, those read and the time it took."""

    cache_n: int
    prompt_n: int
    prompt_ms: float
    prompt_per_token_ms: float
    prompt_per_second: float


def prompt_timings(processed: int, seconds: float, cached: int) -> PromptTimings:
    prompt_ms = seconds * 1000
    return {
        "cache_n": cached,
        "prompt_n": processed,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / processed if processed else 0.0,
        "prompt_per_second": processed / seconds if seconds else 0.0,
    }


def timings(outcome: GenerationOutcome) -> Timings:
    processed = max(outcome.prompt_tokens - outcome.reused_prompt_tokens, 0)
    prompt = prompt_timings(processed, outcome.prompt_seconds, outcome.reused_prompt_tokens)
    predicted = predicted_timings(outcome.completion_tokens, outcome.generation_seconds)
    figures = joined_timings(prompt, predicted)
    if outcome.draft_tokens:  # as llama-server: only when something was drafted
        figures["draft_n"] = outcome.draft_tokens
        figures["draft_n_accepted"] = outcome.draft_accepted
    return figures


def joined_timings(prompt: PromptTimings, predicted: PredictedTimings) -> Timings:
    return {
        "cache_n": prompt["cache_n"],
        "prompt_n": prompt["prompt_n"],
        "prompt_ms": prompt["prompt_ms"],
        "prompt_per_token_ms": prompt["prompt_per_token_ms"],
        "prompt_per_second": prompt["prompt_per_second"],
        "predicted_n": predicted["predicted_n"],
        "predicted_ms": predicted["predicted_ms"],
        "predicted_per_token_ms": predicted["predicted_per_token_ms"],
        "predicted_per_second": predicted["predicted_per_second"],
    }


def stop_type(outcome: GenerationOutcome) -> str:
    if outcome.finish_reason is FinishReason.LENGTH:
        return "limit"
    if outcome.finish_reason is FinishReason.STOP:
        return "word" if outcome.stop_sequence is not None else "eos"
    return "none"


def generation_settings(
    generation: GenerationRequest, seed: int, n_ctx: int, *, n_predict: int, stream: bool
) -> dict[str, Any]:
    """llama-server's `generation_settings`: what `generation` ran with, in its names."""
    sampling = generation.sampling
    return {
        "n_ctx": n_ctx,
        "n_predict": n_predict,
        "max_tokens": n_predict,
        "seed": seed,
        "temperature": sampling.temperature,
        "top_k": sampling.top_k,
        "top_p": sampling.top_p,
        "min_p": sampling.min_p,
        "repeat_last_n": sampling.rep_pen_range,
        "repeat_penalty": sampling.rep_pen,
        "presence_penalty": sampling.presence_penalty,
        "frequency_penalty": sampling.frequency_penalty,
        "ignore_eos": sampling.ban_eos,
        "stream": stream,
        "logit_bias": reported_logit_bias(sampling.logit_bias),
        "n_probs": generation.logprobs or 0,
        "post_sampling_probs": generation.post_sampling_probs,
        "grammar": generation.grammar or "",
        "samplers": ["penalties", "top_k", "top_p", "min_p", "temperature"],
    }


class LogitBiasEntry(TypedDict):
    bias: float | None  # None: -inf, a ban (JSON has no infinity)
    token: int


def reported_logit_bias(pairs: Sequence[tuple[int, float]]) -> list[LogitBiasEntry]:
    """A request's logit biases as llama-server reports them in `generation_settings`."""
    return [
        {"bias": bias if math.isfinite(bias) else None, "token": token} for token, bias in pairs
    ]


@runtime_checkable
class ListsEndTokens(Protocol):
    """A tokenizer that names its model's end-of-generation tokens (llama.cpp's EOG set: end
    of sequence, end of turn and the like)."""

    @property
    def end_tokens(self) -> Sequence[int]: ...


def with_end_token_bias(plan: ChatPlan, tokenizer: object) -> ChatPlan:
    """llama-server's `ignore_eos`: the end-of-generation tokens get a -inf logit bias after
    the request's own, so the settings the request reports show them. The engine bans them
    for `ban_eos` anyway; the bias says the same thing twice, never something else."""
    sampling = plan.generation.sampling
    if not sampling.ban_eos or not isinstance(tokenizer, ListsEndTokens):
        return plan
    banned = tuple((token, -math.inf) for token in tokenizer.end_tokens)
    sampling = dataclasses.replace(sampling, logit_bias=sampling.logit_bias + banned)
    generation = dataclasses.replace(plan.generation, sampling=sampling)
    return dataclasses.replace(plan, generation=generation)


def native_answer(
    answer: ChatAnswer,
    index: int,
    content: str,
    tokens: list[int],
    model: str,
    settings: dict[str, Any],
    prompt: str,
) -> NativeCompletion:
    """llama-server's final /completion object for a finished reply (also the `__verbose`
    of its OpenAI answers)."""
    outcome = answer.outcome
    return {
        "index": index,
        "content": content,
        "tokens": tokens,
        "id_slot": 0,
        "stop": True,
        "model": model,
        "tokens_predicted": outcome.completion_tokens,
        "tokens_evaluated": outcome.prompt_tokens,
        "generation_settings": settings,
        "prompt": prompt,
        "has_new_line": "\n" in answer.text,
        "truncated": outcome.prompt_truncated,
        "stop_type": stop_type(outcome),
        "stopping_word": outcome.stop_sequence or "",
        "tokens_cached": outcome.prompt_tokens + outcome.completion_tokens,
        "timings": timings(outcome),
    }


@dataclass(frozen=True, slots=True)
class LlamaExtras:
    """What llama-server adds to an OpenAI answer on request: `__verbose` (its native
    /completion answer, the rendered prompt and the settings that ran included) and
    `timings` on every content chunk (`timings_per_token`; the last chunk always has them)."""

    generation: GenerationRequest
    n_ctx: int
    verbose: bool = False
    timings_per_token: bool = False

    def native(self, answer: ChatAnswer, model: str, index: int, stream: bool) -> NativeCompletion:
        generation = self.generation
        settings = generation_settings(
            generation,
            answer.outcome.seed,
            self.n_ctx,
            n_predict=generation.max_tokens,
            stream=stream,
        )
        tokens = list(answer.tokens.token_ids)
        return native_answer(answer, index, answer.text, tokens, model, settings, generation.prompt)


class ReplyClock:
    """llama-server's `timings_per_token` for one reply: its figures so far at each piece of
    text, timed from its first, with the prompt's once a progress report has said them (the
    prompt's figures always come with the end)."""

    def __init__(self) -> None:
        self._first_at: float | None = None
        self._tokens = 0
        self._prompt: Progress | None = None

    def read(self, progress: Progress) -> None:
        """The prompt as last reported (`return_progress`)."""
        self._prompt = progress

    def after(self, tokens: int) -> Timings | PredictedTimings:
        """The figures once `tokens` more have come."""
        now = time.perf_counter()
        if self._first_at is None:
            self._first_at = now
        self._tokens += tokens
        predicted = predicted_timings(self._tokens, now - self._first_at)
        prompt = self._prompt
        if prompt is None:
            return predicted
        read = max(prompt.prompt_done - prompt.cached, 0)
        return joined_timings(prompt_timings(read, prompt.seconds, prompt.cached), predicted)
