"""ScriptedEngine: a model stand-in that replays fixed token pieces, for protocol tests and for
measuring the HTTP path alone (no model time). It follows the same Engine contract as
LlamaCppEngine and uses the same text pipeline, so stop strings and UTF-8 behave identically.
A test double: it lives under tests/, so the packaged binary does not carry it.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from server.core.caching.prompt_cache import MIB, PromptCache, PromptCacheStats
from server.core.scheduling.engine import EngineError
from server.core.templates.chat import ChatTemplate
from server.core.text.text_stream import TokenTextPipeline
from server.core.types import (
    EmbeddingsEvent,
    EmbedInput,
    EngineEvent,
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    Progress,
    TokenEvent,
    ToolDecision,
)
from server.devices.placement import CPU_ONLY, Placement

# The scripted model's vectors: a digest of the input's bytes, so the same input always gives
# the same vector and different inputs differ.
SCRIPTED_EMBEDDING_SIZE = 8


class ScriptedEngine:
    """Emits `pieces` in order (cycling when a request wants more), one per `token_seconds`.
    Embedding requests get one vector per input (`scripted_embedding`); an input longer than
    the context is refused, or cut with `embed_truncate`.

    `fail_after`: raise an EngineError after that many tokens, to exercise failure paths.
    `end_after`: behave as if the model produced its end-of-sequence token after that many.
    `prompt_chunk`: read the prompt in decodes of that many tokens, each `prompt_seconds`
    long, reporting Progress as LlamaCppEngine does (first before any is read); without it
    the prompt takes no time and is reported once, read.
    `modalities`: what it claims its projector takes ("vision", "audio"), so that requests
    with media are admitted; they are recorded in `requests`, never read.
    `tool_decision`: the hidden tool decision's answer (tool_choice "auto" without a format of
    the model's own), given before the first token; None: a call when the pieces begin with
    `{` (the scripted reply is a call), after `decision_seconds`.
    """

    def __init__(
        self,
        pieces: Sequence[bytes] = (b"Hello", b",", b" world", b"!"),
        *,
        token_seconds: float = 0.0,
        fail_after: int | None = None,
        end_after: int | None = None,
        context_size: int = 4096,
        chat_template: ChatTemplate | None = None,
        prompt_chunk: int | None = None,
        prompt_seconds: float = 0.0,
        modalities: frozenset[str] = frozenset(),
        tool_decision: bool | None = None,
        decision_seconds: float = 0.0,
    ) -> None:
        self._tool_decision = tool_decision
        self._decision_seconds = decision_seconds
        self._pieces = list(pieces)
        self.modalities = modalities
        self._prompt_chunk = prompt_chunk
        self._prompt_seconds = prompt_seconds
        self._token_seconds = token_seconds
        self._fail_after = fail_after
        self._end_after = end_after
        self._context_size = context_size
        self.requests: list[GenerationRequest] = []
        self._chat_template = chat_template or ChatTemplate(None, "gemma3")

    @property
    def model_name(self) -> str:
        return "scripted"

    @property
    def context_size(self) -> int:
        return self._context_size

    @property
    def model_path(self) -> Path | None:
        return None

    @property
    def chat_template(self) -> ChatTemplate:
        return self._chat_template

    @property
    def placement(self) -> Placement:
        return CPU_ONLY

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return list(text.encode("utf-8"))

    def detokenize(self, ids: list[int], special: bool = True) -> str:
        if any(not 0 <= i < 256 for i in ids):
            raise ValueError("token ids out of range 0..255")
        return bytes(ids).decode("utf-8", errors="replace")

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return len(self.tokenize(request.memory + request.prompt))

    def check_json_schema(self, schema: dict[str, Any]) -> None:
        if not isinstance(schema, dict):
            raise ValueError("a JSON schema must be an object")

    def check_grammar(self, grammar: str) -> None:
        if "root ::=" not in grammar:
            raise ValueError("a grammar needs a root rule")

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        self.requests.append(request)
        if request.embed_inputs:
            yield from self._embed(request)
            return
        started = time.perf_counter()
        prompt = self.count_prompt_tokens(request)
        if self._prompt_chunk is None:
            yield Progress(prompt, prompt, 0)  # the scripted prompt takes no time
        else:
            yield from self._read_prompt(prompt, self._prompt_chunk, started, cancelled)
        bound = request.json_schema is not None
        if bound and request.schema_decision_prompt is not None:
            bound = self._decide(cancelled)
            yield ToolDecision(bound)
        pipeline = TokenTextPipeline(request.stop, request.trim_stop)
        finish = FinishReason.LENGTH
        stop_sequence: str | None = None
        first_text_at: float | None = None
        generated = 0
        while generated < request.max_tokens:
            if cancelled.wait(self._token_seconds) if self._token_seconds else cancelled.is_set():
                finish = FinishReason.CANCELLED
                break
            if self._fail_after is not None and generated >= self._fail_after:
                raise EngineError("scripted failure")
            if self._end_after is not None and generated >= self._end_after:
                finish = FinishReason.STOP
                break
            piece = self._pieces[generated % len(self._pieces)]
            generated += 1
            text, stop_sequence = pipeline.push(piece)
            if text:
                first_text_at = first_text_at or time.perf_counter()
                yield TokenEvent(text)
            yield Progress(prompt, prompt, generated)
            if stop_sequence is not None:
                finish = FinishReason.STOP
                break
        if stop_sequence is None and (rest := pipeline.finish()):
            yield TokenEvent(rest)
        yield GenerationOutcome(
            finish,
            prompt_tokens=prompt,
            completion_tokens=generated,
            generation_seconds=time.perf_counter() - started,
            time_to_first_token=None if first_text_at is None else first_text_at - started,
            seed=request.sampling.seed,
            stop_sequence=stop_sequence,
            constrained=bound,
        )

    def _decide(self, cancelled: threading.Event) -> bool:
        cancelled.wait(self._decision_seconds)
        if self._tool_decision is not None:
            return self._tool_decision
        return self._pieces[0].lstrip().startswith(b"{")

    def _read_prompt(
        self, prompt: int, chunk: int, started: float, cancelled: threading.Event
    ) -> Iterator[Progress]:
        """The prompt read `chunk` tokens per scripted decode (nothing cached): a report
        before the first, then one after each; a cancelled request stops reading."""
        done = 0
        yield Progress(0, prompt, 0, 0, time.perf_counter() - started)
        while done < prompt and not cancelled.wait(self._prompt_seconds):
            done = min(done + chunk, prompt)
            yield Progress(done, prompt, 0, 0, time.perf_counter() - started)

    def _embed(self, request: GenerationRequest) -> Iterator[EngineEvent]:
        counts: list[int] = []
        for index, item in enumerate(request.embed_inputs):
            tokens = len(self._input_ids(item))
            if tokens > self._context_size and not request.embed_truncate:
                error = f"input {index} is {tokens} tokens long; at most {self._context_size}"
                yield GenerationOutcome(FinishReason.ERROR, error=error, input_rejected=True)
                return
            counts.append(min(tokens, self._context_size))
        vectors = tuple(scripted_embedding(item) for item in request.embed_inputs)
        yield EmbeddingsEvent(vectors, tuple(counts))
        yield GenerationOutcome(FinishReason.STOP, prompt_tokens=sum(counts))

    def _input_ids(self, item: EmbedInput) -> list[int]:
        return self.tokenize(item) if isinstance(item, str) else list(item)

    def close(self) -> None:
        pass


class CachingScriptedEngine(ScriptedEngine):
    """A ScriptedEngine with a prompt cache (server/core/engine.CachesPrompts), which its
    generation never uses: tests put states in it directly. A subclass, not an optional
    argument of ScriptedEngine: a runtime Protocol checks that the attribute exists, so the
    plain engine must not have one at all."""

    def __init__(
        self,
        pieces: Sequence[bytes] = (b"Hello", b",", b" world", b"!"),
        *,
        prompt_cache: PromptCache | None = None,
        **options: Any,
    ) -> None:
        super().__init__(pieces, **options)
        self._prompt_cache = PromptCache(64 * MIB) if prompt_cache is None else prompt_cache

    @property
    def prompt_cache(self) -> PromptCache:
        return self._prompt_cache

    def prompt_cache_stats(self) -> PromptCacheStats:
        return self._prompt_cache.stats()


def scripted_embedding(item: EmbedInput) -> tuple[float, ...]:
    """The unit vector ScriptedEngine gives an embedding input."""
    data = item.encode() if isinstance(item, str) else repr(item).encode()
    values = [byte - 127.5 for byte in hashlib.sha256(data).digest()[:SCRIPTED_EMBEDDING_SIZE]]
    norm = math.sqrt(sum(value * value for value in values))
    return tuple(value / norm for value in values)
