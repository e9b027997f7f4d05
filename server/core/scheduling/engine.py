"""What the scheduler needs from a model, as a Protocol, so tests can swap in a scripted engine.

The real implementation is `server.core.llama.LlamaCppEngine`, the only package that
imports llama_cpp.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from server.core.caching.prompt_cache import PromptCacheStats
from server.core.scheduling.counters import DecodeCounts
from server.core.templates.chat import ChatTemplate
from server.core.types import (
    EngineEvent,
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SlotAction,
    SlotActionEvent,
)
from server.devices.placement import Placement


class Tokenizer(Protocol):
    """Read-only access to the model's vocabulary; safe to call from any thread."""

    def tokenize(self, text: str, special: bool = True) -> list[int]: ...

    def detokenize(self, ids: list[int], special: bool = True) -> str: ...

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        """How many prompt tokens generating `request` will process (after fitting it into
        the context), known before it runs: what Anthropic's `message_start` reports."""
        ...


class SchemaChecker(Protocol):
    """Whether a JSON schema can constrain generation; safe to call from any thread."""

    def check_json_schema(self, schema: dict[str, Any]) -> None:
        """Raise `ValueError` saying why when `schema` cannot be turned into a grammar."""
        ...

    def check_grammar(self, grammar: str) -> None:
        """Raise `ValueError` when llama.cpp cannot parse this GBNF grammar."""
        ...


class Engine(Tokenizer, SchemaChecker, Protocol):
    """A loaded model that turns one request into a stream of events.

    `generate` runs on the scheduler's worker thread. It must yield `TokenEvent`s as text becomes
    safe to send and end with exactly one `GenerationOutcome`; it checks `cancelled` between
    tokens so an abort or a departed client stops work within one token. A request with
    `embed_inputs` yields one `EmbeddingsEvent` instead of text. It may yield `Progress`
    reports among the events (prompt tokens decoded, tokens generated) for the live view.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def context_size(self) -> int: ...

    @property
    def model_path(self) -> Path | None:
        """The GGUF file the model was loaded from (None for a stand-in)."""
        ...

    @property
    def chat_template(self) -> ChatTemplate:
        """How chat messages become this model's prompt (its own template or a built-in)."""
        ...

    @property
    def placement(self) -> Placement:
        """Where the model runs (backend, devices, offloaded layers)."""
        ...

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]: ...

    def close(self) -> None: ...


class Embedder(Protocol):
    """A model serving embedding requests apart from the chat model (--embeddingsmodel)."""

    def embed(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineEvent]:
        """One EmbeddingsEvent for `request.embed_inputs`, then the GenerationOutcome."""
        ...

    def close(self) -> None: ...


class EngineError(RuntimeError):
    """A failure inside the engine that should end one request, not the server;
    `client_error` when the request was at fault (its outcome is `input_rejected`: a 400)."""

    client_error: bool = False


class ContextOverflow(EngineError):
    """A prompt longer than the context, refused as the request asked (`refuse_overflow`)."""

    client_error = True

    def __init__(self, prompt_tokens: int, context: int) -> None:
        super().__init__(
            f"request ({prompt_tokens} tokens) exceeds the available context size "
            f"({context} tokens), try increasing it"
        )
        self.prompt_tokens, self.context = prompt_tokens, context


def failure_outcome(exc: Exception) -> GenerationOutcome:
    """How a request that failed to start or run ends: the client's fault (an unreadable
    image, a prompt over the context) when the engine says so, which the dialects answer with
    a 400 (with both sizes for an overflow) rather than a 500."""
    rejected = isinstance(exc, EngineError) and exc.client_error
    overflow = (exc.prompt_tokens, exc.context) if isinstance(exc, ContextOverflow) else None
    return GenerationOutcome(
        FinishReason.ERROR, error=str(exc), input_rejected=rejected, context_overflow=overflow
    )


class MediaError(EngineError):
    """A request's image or sound that llama.cpp cannot read (the edge's checks passed it):
    the client's bytes are at fault, not the server."""

    client_error = True


class SlotActionError(EngineError):
    """A slot action that could not be done; `client_error` when the request was at fault
    (no such slot, a file that is not a state of this model): a 400, not a 500."""

    def __init__(self, message: str, *, client_error: bool = False) -> None:
        super().__init__(message)
        self.client_error = client_error


@runtime_checkable
class BatchEngine(Engine, Protocol):
    """An engine that can generate several sequences together (continuous batching)."""

    @property
    def parallel_slots(self) -> int: ...

    def start_sequence(self, request: GenerationRequest, cancelled: threading.Event) -> object:
        """Take a free slot; the returned handle labels this sequence's events."""
        ...

    def step(self) -> list[tuple[object, EngineReport]]:
        """Advance every active sequence by one decode; return the events it produced (and
        the `Progress` of each sequence still going)."""
        ...


@runtime_checkable
class CountsDecodes(Protocol):
    """An engine that counts its decodes, for /metrics (llama-server's n_decode_total and
    n_busy_slots_per_decode); an engine without (a scripted one) reports none."""

    @property
    def decode_counts(self) -> DecodeCounts:
        """Totals since the engine was loaded; read from any thread (plain integers)."""
        ...


@runtime_checkable
class CachesPrompts(Protocol):
    """An engine that keeps processed prompts for later requests
    (server/core/caching/prompt_cache.py), for /metrics and /api/extra/perf; a scripted one has
    none."""

    def prompt_cache_stats(self) -> PromptCacheStats:
        """Its saved states in memory and on disk, and their use; read from any thread."""
        ...


@runtime_checkable
class KeepsSlots(Protocol):
    """An engine whose slots' KV states can be saved, restored and erased on request
    (llama-server's /slots actions, KoboldCpp's save states); a scripted one cannot."""

    def slot_action(self, action: SlotAction, owner: str) -> SlotActionEvent:
        """Do it (worker thread); raise SlotActionError saying why it could not be done."""
        ...

    def slot_tokens(self) -> list[int]:
        """How many tokens each slot's KV cache holds; read from any thread."""
        ...
