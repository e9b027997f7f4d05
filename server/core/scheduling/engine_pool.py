"""EnginePool: the models behind the scheduler, loaded, switched and unloaded between jobs.

The scheduler's worker thread is the only caller of `use`, `unload` and the generation
methods, so a model is loaded, used and closed on one thread. Up to `max_loaded` engines stay
loaded, least recently used evicted first. A model that fails to load fails only the job that
asked for it: the models loaded before stay (with one slot, the evicted one is loaded again).
A pool may hold no model at all (Ollama's keep_alive 0, KoboldCpp's unload_model); the API
names the model of every job (server/dialects/pipeline/model_choice.py), `use(None)` loads the last
one. Other threads may read `loading`, `current_name` and `loaded_names` (plain attribute reads) for
/api/extra/perf. With a separate embeddings model (--embeddingsmodel), embedding requests go to
it and never load or switch a chat model (`embeds_apart`).

The scheduler always works on a pool: a server given one engine without a catalog (a scripted
engine in tests) gets a pool of one (`EnginePool.of_one`), which runs every job on that engine
whatever model the job names and never unloads it, since nothing could load it again.

The API side must not reach into the pool's engines (they may be closed between two calls):
requests are planned with each model's vocabulary (server/core/llama/model.Vocabulary).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from server.core.caching.prompt_cache import PromptCacheStats
from server.core.scheduling.counters import DecodeCounts
from server.core.scheduling.engine import (
    BatchEngine,
    CachesPrompts,
    CountsDecodes,
    Embedder,
    Engine,
    EngineError,
    KeepsSlots,
    SlotActionError,
)
from server.core.templates.chat import ChatTemplate
from server.core.types import (
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
)
from server.devices.placement import Placement

logger = logging.getLogger(__name__)

Loader = Callable[[Path], Engine]


class EnginePool:
    def __init__(
        self,
        first_name: str,
        first: Engine,
        paths: dict[str, Path],
        loader: Loader,
        max_loaded: int = 1,
        embedder: Embedder | None = None,
    ) -> None:
        self._paths = paths
        self._embedder = embedder
        self._loader = loader
        self._max_loaded = max(1, max_loaded)
        self._loaded: OrderedDict[str, Engine] = OrderedDict([(first_name, first)])
        # The model serving now; after an unload, the one a job naming no model loads again.
        self._current_name = first_name
        self._slots = first.parallel_slots if isinstance(first, BatchEngine) else 1
        self._expires_at: dict[str, float] = {}  # keep_alive deadlines (time.monotonic)
        self.loading: str | None = None  # the model being loaded now, for perf
        self._unloaded_decodes = DecodeCounts()  # of the engines closed so far, for /metrics
        # Engines of one kind: when the first counts its decodes, so do those loaded later.
        self._counts_decodes = isinstance(first, CountsDecodes)
        # Likewise for the prompt cache: the use counters of the engines closed so far (what
        # they held went with them).
        self._caches_prompts = isinstance(first, CachesPrompts)
        self._unloaded_prompt_cache = PromptCacheStats()
        # The bounds (--cacheram, --cachedisk) of the last engine closed: with none loaded
        # (asleep), /metrics still shows the bound the next one loads with.
        self._bounds_when_none = PromptCacheStats()
        self._only_one = False  # a pool of one (`of_one`): no catalog to load from

    @classmethod
    def of_one(cls, engine: Engine) -> EnginePool:
        """A pool holding just `engine`, with no catalog: every job runs on it, whatever model
        it names, and it stays loaded (keep_alive and unloading do not apply to it)."""
        pool = cls(engine.model_name, engine, {}, _cannot_load)
        pool._only_one = True
        return pool

    @property
    def current(self) -> Engine:
        return self._loaded[self._current_name]

    @property
    def current_name(self) -> str | None:
        """The model serving now, or None when none is loaded."""
        name = self._current_name
        return name if name in self._loaded else None

    @property
    def loaded_names(self) -> list[str]:
        return list(self._loaded)

    @property
    def can_unload(self) -> bool:
        """False for a pool of one: nothing could load its engine again."""
        return not self._only_one

    def add(self, name: str, path: Path) -> None:
        """A model that joined the catalog while serving (a finished /api/pull)."""
        self._paths[name] = path

    def use(self, name: str | None) -> None:
        """Make `name` the current model, loading it (and evicting) when needed. None: the
        current model (loaded again if it was unloaded)."""
        name = self._name_for(name)
        if name in self._loaded:
            self._loaded.move_to_end(name)
            self._current_name = name
            return
        path = self._paths.get(name)
        if path is None:
            raise EngineError(f"model '{name}' is not in the catalog")
        evicted: list[tuple[str, Path | None]] = []
        while len(self._loaded) >= self._max_loaded:
            old_name, old = self._loaded.popitem(last=False)
            evicted.append((old_name, old.model_path))
            self._close(old_name, old)
        self.loading = name
        try:
            # Listed before `loading` clears: a reader sees it loading, then loaded (never
            # neither: /models would say unloaded, /props asleep).
            self._loaded[name] = self._loader(path)
            self._current_name = name
        except Exception as exc:
            # Whatever the loader raised (a file deleted or cut short since it was listed is an
            # OSError or a GGUF error, not an EngineError): this job fails, the others go on.
            self._reload(evicted)
            if isinstance(exc, EngineError):
                raise
            raise EngineError(f"{path}: could not load the model: {exc}") from exc
        finally:
            self.loading = None

    def embeds_apart(self, request: GenerationRequest) -> bool:
        """An embedding request that the separate embeddings model serves: it needs no chat
        model loaded, so the scheduler neither switches nor keeps one alive for it."""
        return self._embedder is not None and bool(request.embed_inputs)

    def needs_load(self, name: str | None) -> bool:
        return self._name_for(name) not in self._loaded

    def switch_needed(self, name: str | None) -> bool:
        """Whether a job naming `name` (None: the current model) needs a model loaded or
        another model made current before it can run (never, in a pool of one)."""
        if self._only_one:
            return False
        return self.needs_load(name) or (name is not None and name != self.current_name)

    def _name_for(self, name: str | None) -> str:
        """The model a job naming `name` runs on."""
        return self._current_name if self._only_one or not name else name

    def unload(self, name: str | None = None) -> list[str]:
        """Close `name` (None: every loaded model); the names closed. A pool of one keeps its
        engine: nothing could load it again."""
        if self._only_one:
            return []
        names = [n for n in self._loaded if name is None or n == name]
        for closing in names:
            self._close(closing, self._loaded.pop(closing))
        if self._current_name not in self._loaded and self._loaded:
            self._current_name = next(reversed(self._loaded))  # the most recently used left
        return names

    def forget(self, name: str) -> None:
        """A model no longer in the catalog (deleted): never loaded again."""
        self._paths.pop(name, None)

    def _close(self, name: str, engine: Engine) -> None:
        logger.info("Unloading %s", name)
        self._expires_at.pop(name, None)
        if isinstance(engine, CountsDecodes):
            self._unloaded_decodes = self._unloaded_decodes.plus(engine.decode_counts)
        if isinstance(engine, CachesPrompts):
            stats = engine.prompt_cache_stats()
            self._unloaded_prompt_cache = _counters_only(stats).plus(self._unloaded_prompt_cache)
            self._bounds_when_none = PromptCacheStats(
                max_bytes=stats.max_bytes, disk_max_bytes=stats.disk_max_bytes
            )
        engine.close()

    # -- keep_alive (Ollama): how long a model stays loaded after a job ------------------------

    def keep_alive(self, name: str, seconds: float) -> None:
        """After a job on `name` that asked for it: unload once idle for `seconds` (negative:
        never; 0: as soon as no waiting job needs it). A pool of one never unloads."""
        if self._only_one:
            return
        if not seconds >= 0 or math.isinf(seconds):  # negative, NaN or infinite: never
            self._expires_at.pop(name, None)
        else:
            self._expires_at[name] = time.monotonic() + seconds

    def unloads_in(self, name: str) -> float:
        """Seconds until `name` is unloaded by its keep_alive (inf: not planned)."""
        deadline = self._expires_at.get(name)
        return math.inf if deadline is None else max(0.0, deadline - time.monotonic())

    def next_expiry(self) -> float:
        """Seconds until the next keep_alive deadline (inf: none)."""
        if not self._expires_at:
            return math.inf
        return max(0.0, min(self._expires_at.values()) - time.monotonic())

    def unload_expired(self, still_needed: set[str | None]) -> list[str]:
        """Close the models whose keep_alive ran out, except those a waiting job needs."""
        now = time.monotonic()
        expired = [
            name
            for name, deadline in self._expires_at.items()
            if deadline <= now and name not in still_needed
        ]
        closed: list[str] = []
        for name in expired:
            self._expires_at.pop(name, None)
            if name in self._loaded:
                closed += self.unload(name)
        return closed

    def _reload(self, evicted: list[tuple[str, Path | None]]) -> None:
        """After a failed load: bring back what was unloaded for it (if it still loads)."""
        for name, path in evicted:
            if path is None:
                continue
            try:
                self._loaded[name] = self._loader(path)
            except Exception:
                logger.exception("Could not load %s again", name)
        if self._current_name not in self._loaded and self._loaded:
            self._current_name = next(reversed(self._loaded))

    @property
    def decode_counts(self) -> DecodeCounts | None:
        """Decodes of every model since the server started, unloaded ones included (any
        thread: the engines list is copied at once, each count is a plain integer); None
        when the engines do not count them (a scripted one)."""
        if not self._counts_decodes:
            return None
        total = self._unloaded_decodes
        for engine in list(self._loaded.values()):
            if isinstance(engine, CountsDecodes):
                total = total.plus(engine.decode_counts)
        return total

    def prompt_cache_stats(self) -> PromptCacheStats | None:
        """The prompt caches of every model: what the loaded ones hold now, and their use since
        the server started, unloaded ones included (any thread, as `decode_counts`); None when
        the engines keep no prompts (a scripted one)."""
        if not self._caches_prompts:
            return None
        total = self._unloaded_prompt_cache
        engines = list(self._loaded.values())
        if not engines:
            return total.plus(self._bounds_when_none)
        # A cast, not an isinstance: the engines are of one kind, and checking a runtime
        # Protocol would cost more than the rest (perf's snapshot is taken at every admission).
        for engine in engines:
            total = total.plus(cast(CachesPrompts, engine).prompt_cache_stats())
        return total

    # -- the Engine protocol, delegated to the current model (worker thread only) --------------

    @property
    def model_name(self) -> str:
        return self._current_name  # when unloaded: the model a job naming none loads again

    @property
    def context_size(self) -> int:
        return self.current.context_size

    @property
    def model_path(self) -> Path | None:
        return self.current.model_path

    @property
    def chat_template(self) -> ChatTemplate:
        return self.current.chat_template

    @property
    def placement(self) -> Placement:
        return self.current.placement

    @property
    def parallel_slots(self) -> int:
        return self._slots

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return self.current.tokenize(text, special)

    def detokenize(self, ids: list[int], special: bool = True) -> str:
        return self.current.detokenize(ids, special)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return self.current.count_prompt_tokens(request)

    def check_json_schema(self, schema: dict[str, Any]) -> None:
        self.current.check_json_schema(schema)

    def check_grammar(self, grammar: str) -> None:
        self.current.check_grammar(grammar)

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        if self._embedder is not None and request.embed_inputs:
            return self._embedder.embed(request, cancelled)
        if request.slot_action is not None:
            return self._slot_action(request)
        return self.current.generate(request, cancelled)

    def _slot_action(self, request: GenerationRequest) -> Iterator[EngineReport]:
        engine, action = self.current, request.slot_action
        assert action is not None
        if not isinstance(engine, KeepsSlots):
            yield GenerationOutcome(FinishReason.ERROR, error="this engine keeps no slot states")
            return
        try:
            yield engine.slot_action(action, request.cache_owner)
        except SlotActionError as exc:
            yield GenerationOutcome(
                FinishReason.ERROR, error=str(exc), input_rejected=exc.client_error
            )
            return
        yield GenerationOutcome(FinishReason.STOP)

    def slot_tokens(self) -> list[int]:
        """How many tokens each slot of the current model holds (any thread; [] when none is
        loaded or the engine does not say)."""
        engine = self._loaded.get(self._current_name)
        return engine.slot_tokens() if isinstance(engine, KeepsSlots) else []

    # The scheduler batches only when the first engine has parallel slots, and every engine
    # of a pool is loaded alike. A cast, not an isinstance: checking a runtime Protocol reads
    # every one of its attributes, which would cost tens of microseconds at every step.
    def start_sequence(self, request: GenerationRequest, cancelled: threading.Event) -> object:
        return cast(BatchEngine, self.current).start_sequence(request, cancelled)

    def step(self) -> list[tuple[object, EngineReport]]:
        return cast(BatchEngine, self.current).step()

    def close(self) -> None:
        for engine in self._loaded.values():
            engine.close()
        self._loaded.clear()
        if self._embedder is not None:
            self._embedder.close()
            self._embedder = None


def _counters_only(stats: PromptCacheStats) -> PromptCacheStats:
    """A closing engine's cache use: what it held (and its bound) goes with it."""
    return PromptCacheStats(stats.saved, stats.restored, stats.restored_tokens, stats.evicted)


def _cannot_load(path: Path) -> Engine:
    raise EngineError(f"{path}: this server serves one model and loads no other")
