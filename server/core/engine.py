"""What the scheduler needs from a model, as a Protocol, so tests can swap in a scripted engine.

The real implementation is `server.core.llama.LlamaCppEngine`, the only package that
imports llama_cpp.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from server.core.chat import ChatTemplate
from server.core.counters import DecodeCounts
from server.core.prompt_cache import PromptCache
from server.core.types import EngineEvent, EngineReport, GenerationRequest
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
    """A failure inside the engine that should end one request, not the server."""


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
    """An engine that keeps processed prompts for later requests (server/core/prompt_cache.py),
    for /metrics and /api/extra/perf; a scripted one has none."""

    @property
    def prompt_cache(self) -> PromptCache:
        """Its saved states; `stats()` may be read from any thread (the cache locks)."""
        ...
