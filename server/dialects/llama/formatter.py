"""llama-server's native /completion answer and stream (`data:` lines, no `[DONE]`).

Each stream event carries its text, the token ids that made it and, with `n_probs`, their
probabilities; the last one has `stop: true` and the figures (`timings`, `stop_type`,
`truncated`, ...). With `return_progress`, events without text (`prompt_progress`) say how far
the prompt is read first; with `timings_per_token` too, each of them and each text event carries
`timings` (the prompt's figures so far, none before its first batch is read, as llama-server
counts). A failure after the stream began is an `{"error": ...}` event, as
llama-server sends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sse_starlette import ServerSentEvent

from server.core.tool_calls.tool_stream import ChatStreamEvent, TextDelta
from server.core.types import GenerationRequest, Progress, TokenChoice, TokenLogprob
from server.dialects.chat.answers import ChatAnswer
from server.dialects.edge.errors import Dialect
from server.dialects.llama.schemas import CompletionRequest
from server.dialects.routes.llama_extensions import (
    NativeChunk,
    NativeCompletion,
    PredictedTimings,
    ProbabilityEntry,
    ReplyClock,
    Timings,
    TokenProbabilities,
    generation_settings,
    joined_timings,
    native_answer,
    predicted_timings,
    prompt_progress,
    prompt_timings,
)
from server.dialects.streams.wire import SSEFormat, sse_json


def _entry(choice: TokenChoice, post_sampling: bool) -> ProbabilityEntry:
    entry: ProbabilityEntry = {
        "id": choice.token_id,
        "token": choice.piece.decode("utf-8", errors="replace"),
        "bytes": list(choice.piece),
    }
    if post_sampling:
        entry["prob"] = choice.logprob  # a probability, not a log, after sampling
    else:
        entry["logprob"] = choice.logprob
    return entry


def probabilities(
    tokens: tuple[TokenLogprob, ...], post_sampling: bool
) -> list[TokenProbabilities]:
    entries: list[TokenProbabilities] = []
    for token in tokens:
        entry: TokenProbabilities = {**_entry(token.chosen, post_sampling)}  # type: ignore[typeddict-item]
        top = [_entry(choice, post_sampling) for choice in token.top]
        entry["top_probs" if post_sampling else "top_logprobs"] = top
        entries.append(entry)
    return entries


def progress_timings(progress: Progress) -> Timings:
    """llama-server's `timings` on a `prompt_progress` event: the prompt's tokens read so far
    (not the cached ones) and their time, which is 0 until a batch has been read, and no
    reply yet."""
    read = max(progress.prompt_done - progress.cached, 0)
    seconds = progress.seconds if read else 0.0
    return joined_timings(prompt_timings(read, seconds, progress.cached), predicted_timings(0, 0.0))


def nested_fields(paths: list[str], answer: Mapping[str, Any]) -> dict[str, Any]:
    """llama-server's `response_fields`: only these values, each under its own path
    ("generation_settings/n_predict"); a path that leads nowhere is left out."""
    picked: dict[str, Any] = {}
    for path in paths:
        value: Any = answer
        for key in path.split("/"):
            if not isinstance(value, Mapping) or key not in value:
                break
            value = value[key]
        else:
            picked[path] = value
    return picked


class NativeCompletionWire(SSEFormat):
    dialect = Dialect.OPENAI

    def __init__(
        self,
        body: CompletionRequest,
        model: str,
        generation: GenerationRequest,
        n_ctx: int,
        index: int = 0,
    ) -> None:
        self._body = body
        self._model = model
        self._generation = generation
        self._n_ctx = n_ctx
        self._index = index
        self._predicted = 0
        self._clock = ReplyClock() if body.timings_per_token else None

    def _sent(
        self, chunk: NativeChunk, timings: Timings | PredictedTimings | None
    ) -> ServerSentEvent:
        return sse_json(chunk if timings is None else {**chunk, "timings": timings})

    def _final(self, answer: ChatAnswer, content: str, tokens: list[int]) -> NativeCompletion:
        generation = self._generation
        settings = generation_settings(
            generation,
            answer.outcome.seed,
            self._n_ctx,
            n_predict=self._body.n_predict,
            stream=self._body.stream,
        )
        return native_answer(
            answer, self._index, content, tokens, self._model, settings, generation.prompt
        )

    def whole(self, answer: ChatAnswer) -> Mapping[str, Any]:
        body = self._body
        tokens = list(answer.tokens.token_ids) if body.return_tokens else []
        final = self._final(answer, answer.text, tokens)
        if body.n_probs > 0:
            final["completion_probabilities"] = probabilities(
                answer.tokens.logprobs, body.post_sampling_probs
            )
        if body.response_fields:
            return nested_fields(body.response_fields, final)
        return final

    def event(self, item: ChatStreamEvent) -> list[ServerSentEvent]:
        if not isinstance(item, TextDelta):
            return []
        self._predicted += len(item.token_ids)
        chunk: NativeChunk = {
            "index": self._index,
            "content": item.text,
            "tokens": list(item.token_ids),
            "stop": False,
            "id_slot": -1,
            "tokens_predicted": self._predicted,
        }
        if self._body.n_probs > 0:
            chunk["completion_probabilities"] = probabilities(
                item.logprobs, self._body.post_sampling_probs
            )
        clock = self._clock
        return [self._sent(chunk, clock.after(len(item.token_ids)) if clock else None)]

    def progress(self, progress: Progress) -> list[ServerSentEvent]:
        chunk: NativeChunk = {
            "index": self._index,
            "content": "",
            "tokens": [],
            "stop": False,
            "id_slot": -1,
            "tokens_predicted": self._predicted,
            "prompt_progress": prompt_progress(progress),
        }
        if self._clock is None:
            return [sse_json(chunk)]
        self._clock.read(progress)  # the text's timings say the prompt's figures too
        return [self._sent(chunk, progress_timings(progress))]

    def finished(self, answer: ChatAnswer) -> list[ServerSentEvent]:
        return [sse_json(self._final(answer, "", []))]
