"""llama-server's answer shapes and figures, which two dialects carry.

Its native /completion answer and stream (server/dialects/llama/) are made of these, and so are
the extras llama-server adds to its OpenAI answers (server/dialects/openai/): `timings` on the
last chunk (on every chunk with `timings_per_token`), and with `verbose: true` the native answer
as `__verbose`. Here, not in either dialect package, so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from server.core.types import FinishReason, GenerationOutcome, GenerationRequest, Progress
from server.dialects.common import ChatAnswer


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
    ms = seconds * 1000
    return {
        "predicted_n": tokens,
        "predicted_ms": ms,
        "predicted_per_token_ms": ms / tokens if tokens else 0.0,
        "predicted_per_second": tokens / seconds if seconds else 0.0,
    }


def timings(outcome: GenerationOutcome) -> Timings:
    processed = max(outcome.prompt_tokens - outcome.reused_prompt_tokens, 0)
    prompt_ms = outcome.prompt_seconds * 1000
    predicted = predicted_timings(outcome.completion_tokens, outcome.generation_seconds)
    figures: Timings = {
        "cache_n": outcome.reused_prompt_tokens,
        "prompt_n": processed,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / processed if processed else 0.0,
        "prompt_per_second": processed / outcome.prompt_seconds if outcome.prompt_seconds else 0.0,
        "predicted_n": predicted["predicted_n"],
        "predicted_ms": predicted["predicted_ms"],
        "predicted_per_token_ms": predicted["predicted_per_token_ms"],
        "predicted_per_second": predicted["predicted_per_second"],
    }
    if outcome.draft_tokens:  # as llama-server: only when something was drafted
        figures["draft_n"] = outcome.draft_tokens
        figures["draft_n_accepted"] = outcome.draft_accepted
    return figures


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
        "n_probs": generation.logprobs or 0,
        "post_sampling_probs": generation.post_sampling_probs,
        "grammar": generation.grammar or "",
        "samplers": ["penalties", "top_k", "top_p", "min_p", "temperature"],
    }


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
