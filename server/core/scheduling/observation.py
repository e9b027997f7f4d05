"""What the scheduler shows of itself: the queue for perf and /api/ps, /metrics, the live view.

Read models only: each reading copies what it needs under the queue's lock (server/core/
request_queue.py) and reads the pool's plain attributes, so any thread may ask while the
worker runs; nothing here changes what the worker does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from server.core.caching.prompt_cache import PromptCacheStats
from server.core.scheduling.counters import DecodeCounts, ServerCounters
from server.core.scheduling.engine_pool import EnginePool
from server.core.scheduling.job import Job, JobState
from server.core.scheduling.request_queue import PerfCounters, RequestQueue


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    waiting: int
    running: int
    perf: PerfCounters
    model: str | None = None  # the model serving now (None: none loaded)
    loaded_models: tuple[str, ...] = ()
    loading_model: str | None = None  # being loaded now; its requests wait meanwhile
    unloads_in: tuple[float, ...] = ()  # per loaded model: seconds to its unload (inf: never)
    prompt_cache: PromptCacheStats | None = None  # None: the engines keep no prompts

    @property
    def serving(self) -> str | None:
        """The model a request without a name goes to: mid-switch, the one being loaded."""
        return self.loading_model or self.model


@dataclass(frozen=True, slots=True)
class MetricsReading:
    """What /metrics shows: the totals, the queue now, the engine's decodes (None when the
    engine does not count them) and its prompt cache (None when it keeps no prompts)."""

    counters: ServerCounters
    running: int
    waiting: int
    decodes: DecodeCounts | None
    prompt_cache: PromptCacheStats | None


class LiveState(enum.Enum):
    WAITING = "waiting"  # in line
    PROMPT = "prompt"  # taken by the worker, its prompt being read
    GENERATING = "generating"


@dataclass(frozen=True, slots=True)
class LiveRequest:
    """One open request as the launcher's live view shows it (an admin-only view: it names
    genkeys and clients, which /api/extra/perf never shows)."""

    request_id: str
    genkey: str
    client: str
    dialect: str
    key_name: str  # the API key's name, never the key
    state: LiveState
    prompt_done: int
    prompt_total: int
    generated: int
    tokens_per_second: float  # 0 until it has generated two tokens


@dataclass(frozen=True, slots=True)
class LiveRequests:
    """Every open request, running ones first, then the line in order; and the speed of all
    generating ones together (batched requests add up)."""

    requests: tuple[LiveRequest, ...]
    tokens_per_second: float


class Observer:
    """Readings of one scheduler's queue and models, for any thread."""

    def __init__(self, queue: RequestQueue, pool: EnginePool) -> None:
        self._queue = queue
        self._pool = pool
        self._decodes_reported = DecodeCounts()  # the last /metrics reading's, never less
        self._prompt_cache_reported = PromptCacheStats()  # its counters likewise

    def snapshot(self) -> QueueSnapshot:
        queue, pool = self._queue, self._pool
        with queue.lock:
            running, waiting = queue.running_and_waiting_locked()
        loaded = tuple(pool.loaded_names)
        unloads_in = tuple(pool.unloads_in(name) for name in loaded)
        return QueueSnapshot(
            waiting,
            running,
            queue.perf,
            pool.current_name,
            loaded,
            pool.loading,
            unloads_in,
            pool.prompt_cache_stats(),
        )

    def slot_tokens(self) -> list[int]:
        """How many tokens each slot of the current model holds (GET /slots)."""
        return self._pool.slot_tokens()

    def take_metrics(self) -> MetricsReading:
        """The totals for /metrics; the throughput window restarts, as each llama-server
        scrape restarts it (its rates are over the time since the previous scrape)."""
        queue = self._queue
        counted = self._pool.decode_counts
        cache = self._pool.prompt_cache_stats()
        with queue.lock:
            counters = queue.counters.copy()
            queue.counters.restart_window()
            running, waiting = queue.running_and_waiting_locked()
            if counted is not None:
                # Read while the worker may be unloading a model (its decodes move from the
                # loaded to the unloaded total): never report less than before, or scrapers
                # would see a counter reset.
                reported = self._decodes_reported
                counted = DecodeCounts(
                    max(counted.calls, reported.calls), max(counted.busy_slots, reported.busy_slots)
                )
                self._decodes_reported = counted
            if cache is not None:
                cache = self._never_less(cache)
        return MetricsReading(counters, running, waiting, counted, cache)

    def _never_less(self, cache: PromptCacheStats) -> PromptCacheStats:
        """`cache` with its counters no lower than the last reading's (an engine closing moves
        its counts from the loaded to the unloaded total, as with decodes); the held states
        and bytes are gauges and may fall. Called under the queue's lock."""
        reported = self._prompt_cache_reported
        cache = PromptCacheStats(
            saved=max(cache.saved, reported.saved),
            restored=max(cache.restored, reported.restored),
            restored_tokens=max(cache.restored_tokens, reported.restored_tokens),
            evicted=max(cache.evicted, reported.evicted),
            states=cache.states,
            bytes=cache.bytes,
            max_bytes=cache.max_bytes,
            disk_states=cache.disk_states,
            disk_bytes=cache.disk_bytes,
            disk_max_bytes=cache.disk_max_bytes,
        )
        self._prompt_cache_reported = cache
        return cache

    def live_requests(self) -> LiveRequests:
        """What every open request is doing now, for the launcher's live view."""
        with self._queue.lock:
            jobs = [*self._queue.running, *self._queue.waiting]
        rows = tuple(_live_row(job) for job in jobs)
        speed = sum(row.tokens_per_second for row in rows if row.state is LiveState.GENERATING)
        return LiveRequests(rows, speed)


def _live_row(job: Job) -> LiveRequest:
    request, progress = job.request, job.progress
    if job.state is JobState.QUEUED:
        state = LiveState.WAITING
    else:
        state = LiveState.GENERATING if progress.generating else LiveState.PROMPT
    return LiveRequest(
        request.request_id,
        request.genkey,
        request.client,
        request.dialect,
        request.key_name,
        state,
        progress.prompt_done,
        progress.prompt_total,
        progress.generated,
        progress.tokens_per_second(),
    )
