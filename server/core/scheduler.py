"""KoboldCpp's request queue, done better: strict arrival order, and every place freed at once.

One worker thread owns the engine. With `--parallelrequests N` (an engine with N slots) it runs
up to N plain requests together, one engine `step()` at a time, admitting newcomers as slots
free up (continuous batching); a request that cannot be batched (grammar-bound: tool calls,
JSON formats) waits until the batch drains and then runs alone.

Requests from the event loop are admitted (or refused when the queue is full) synchronously by
`submit`, so the refusal can still be a real HTTP 503 before any byte of a response goes out.
Each job (server/core/job.py) carries an inbox the worker appends to and an `asyncio.Event` it
sets through `loop.call_soon_threadsafe`, the only crossing point between the two worlds.

Differences from KoboldCpp (koboldcpp-behaviour.md §2), on purpose:
- waiters are served first come, first served (KoboldCpp's lock gives no order);
- an aborted or abandoned waiter leaves the queue immediately instead of at its turn;
- several pending aborts can exist (KoboldCpp keeps a single `pendingabortkey`);
- abort, /check, disconnects and perf see batched requests too (KoboldCpp's do not);
- a client that stops reading its stream cannot hold a slot: once `max_pending` of its events
  are unread, its generation is aborted and its stream dropped (`Job.abandoned`);
- at shutdown every open request gets an ending (`shut_down`), not a cut connection.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace

from server.base.defaults import DEFAULT_MULTIUSER
from server.core.counters import DecodeCounts, ServerCounters
from server.core.engine import BatchEngine, CountsDecodes, Engine, EngineError
from server.core.engine_pool import EnginePool
from server.core.job import DEFAULT_MAX_PENDING_EVENTS, Job, JobState
from server.core.types import (
    EmbeddingsEvent,
    EngineEvent,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    Progress,
    TokenEvent,
)

logger = logging.getLogger(__name__)

_REMEMBERED_GENKEYS = 256  # finished jobs kept for late /check polls
_LONGEST_WAIT_SECONDS = 3600.0
SHUTDOWN_MESSAGE = "Hearth is shutting down; the request was not finished."


def waiting_places(multiuser: int, parallel: int = 1) -> int:
    """How many requests may wait behind the running one(s) for a `--multiuser` value.

    KoboldCpp's table: 0 (or less) means no queue, 1 is the legacy "on" value meaning 10,
    N >= 2 allows N-1 to wait so that N are in flight. With parallel requests, 0 acts as 10.
    """
    if multiuser <= 0 and parallel > 1:
        multiuser = DEFAULT_MULTIUSER
    if multiuser <= 0:
        return 0
    if multiuser == 1:
        return DEFAULT_MULTIUSER - 1
    return multiuser - 1


class QueueFullError(Exception):
    """Raised by `submit` when no place is free; the API answers 503."""


@dataclass(frozen=True, slots=True)
class AbortResult:
    success: bool
    done: bool


@dataclass(slots=True)
class PerfCounters:
    """Figures of the last finished generation and totals, for /api/extra/perf."""

    last_outcome: GenerationOutcome | None = None
    total_gens: int = 0
    started_at: float = field(default_factory=time.monotonic)
    last_request_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    waiting: int
    running: int
    perf: PerfCounters
    model: str | None = None  # the model serving now (None: none loaded)
    loaded_models: tuple[str, ...] = ()
    loading_model: str | None = None  # being loaded now; its requests wait meanwhile
    unloads_in: tuple[float, ...] = ()  # per loaded model: seconds to its unload (inf: never)

    @property
    def serving(self) -> str | None:
        """The model a request without a name goes to: mid-switch, the one being loaded."""
        return self.loading_model or self.model


@dataclass(frozen=True, slots=True)
class MetricsReading:
    """What /metrics shows: the totals, the queue now, and the engine's decodes (None when
    the engine does not count them)."""

    counters: ServerCounters
    running: int
    waiting: int
    decodes: DecodeCounts | None


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


FinishedCallback = Callable[[Job], None]


class Scheduler:
    """Runs generations in arrival order (one at a time, or batched), with a bounded line."""

    def __init__(
        self,
        engine: Engine,
        multiuser: int = DEFAULT_MULTIUSER,
        on_finished: FinishedCallback | None = None,
        max_pending_events: int = DEFAULT_MAX_PENDING_EVENTS,
        default_seed: int = -1,
    ) -> None:
        self._engine = engine
        self._default_seed = default_seed  # for requests without a seed; -1: random
        self._max_pending = max_pending_events
        self._slots = engine.parallel_slots if isinstance(engine, BatchEngine) else 1
        self._max_waiting = waiting_places(multiuser, self._slots)
        self._on_finished = on_finished
        self._lock = threading.Condition()
        self._waiting: deque[Job] = deque()
        self._running: list[Job] = []
        self._last_finished: Job | None = None
        self._finished_by_genkey: OrderedDict[str, Job] = OrderedDict()
        self._perf = PerfCounters()
        self._counters = ServerCounters()
        self._decodes_reported = DecodeCounts()
        self._stopping = False
        self._closing = False  # shut_down() was called: admit nothing more
        self._worker: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def parallel_slots(self) -> int:
        return self._slots

    def start(self) -> None:
        work = self._work_batched if self._slots > 1 else self._work
        self._worker = threading.Thread(target=work, name="hearth-generation", daemon=True)
        self._worker.start()

    def shut_down(self) -> None:
        """End every open request with a shutdown outcome and admit no more (503).

        Call from the event loop before the HTTP server closes its connections: waiting
        requests end at once, running ones within a token, so each stream can send its
        dialect's ending instead of being cut off. `idle()` says when all are done.
        """
        with self._lock:
            self._closing = True
            running = list(self._running)
            waiting = list(self._waiting)
            self._waiting.clear()
        for job in running + waiting:
            job.stopped_by_shutdown = True
            job.cancelled.set()  # a running job ends within a token
        for job in waiting:
            self._finish_without_running(job)

    def idle(self) -> bool:
        with self._lock:
            return not self._running and not self._waiting

    def stop(self) -> None:
        """Cancel everything, stop the worker and wait for it (the engine is then idle)."""
        with self._lock:
            self._stopping = True
            for job in self._running:
                job.cancelled.set()
            abandoned = list(self._waiting)
            self._waiting.clear()
            self._lock.notify_all()
        for job in abandoned:
            self._finish_without_running(job)
        if self._worker is not None:
            self._worker.join()

    # -- admission (event-loop thread) ----------------------------------------------------

    def submit(self, request: GenerationRequest) -> Job:
        """Admit a request or raise `QueueFullError`. Call from the event loop's thread."""
        job = Job(request=request, loop=asyncio.get_running_loop(), max_pending=self._max_pending)
        with self._lock:
            if self._closing:
                self._counters.busy_responses += 1
                raise QueueFullError
            self._perf.last_request_at = time.monotonic()
            # Count in-flight requests, not the line alone: a job the worker has not picked up
            # yet is about to run, not waiting behind the running ones.
            if self._in_flight() >= self._slots + self._max_waiting:
                self._counters.busy_responses += 1
                raise QueueFullError
            self._waiting.append(job)
            self._lock.notify()
        return job

    async def event_batches(
        self, job: Job, idle_timeout: float | None = None
    ) -> AsyncIterator[list[EngineEvent] | None]:
        """Yield a job's events in batches of whatever has arrived, until its outcome.

        While tokens flow faster than the client reads, several arrive between two looks and
        go out together (one write instead of many); at model speed each batch holds one.
        With `idle_timeout`, `None` is yielded whenever nothing happened for that long (the job
        waits in line or reads a long prompt), so a stream can send a keep-alive. Leaving
        early (client gone) cancels the job and counts a disconnect.
        """
        ended = False  # the outcome went to the consumer
        try:
            while True:
                if job.inbox:
                    batch = [job.inbox.popleft() for _ in range(len(job.inbox))]
                    # Set before the yield: a consumer may stop right after reading the end.
                    ended = isinstance(batch[-1], GenerationOutcome)
                    yield batch
                    if ended:
                        return
                    continue
                job.arrived.clear()
                if job.inbox:  # arrived between the drain and the clear
                    continue
                try:
                    await asyncio.wait_for(job.arrived.wait(), idle_timeout)
                except TimeoutError:
                    yield None
        finally:
            # Reached on CancelledError/GeneratorExit too: the consumer is gone, so is the job.
            if not ended:
                with self._lock:
                    self._counters.disconnects += 1
            if job.state is not JobState.DONE:
                self.cancel(job)

    async def events(
        self, job: Job, idle_timeout: float | None = None
    ) -> AsyncIterator[EngineEvent | None]:
        """The same, one event at a time (None: nothing happened for `idle_timeout`)."""
        async for batch in self.event_batches(job, idle_timeout):
            if batch is None:
                yield None
                continue
            for event in batch:
                yield event

    async def collect(self, job: Job) -> tuple[str, GenerationOutcome]:
        """Run a job to its end and return all its text with the outcome (non-streaming)."""
        parts: list[str] = []
        async for event in self.events(job):
            if isinstance(event, TokenEvent):
                parts.append(event.text)
            elif isinstance(event, GenerationOutcome):
                return "".join(parts), event
        raise RuntimeError("job ended without an outcome")  # pragma: no cover - engine contract

    # -- control (any thread) ---------------------------------------------------------------

    def cancel(self, job: Job) -> None:
        """Stop a running job within a token, or take a waiting one out of the line now."""
        job.cancelled.set()
        with self._lock:
            try:
                self._waiting.remove(job)
            except ValueError:
                return  # running (the worker sees the flag) or already done
        self._finish_without_running(job)

    def abort(self, genkey: str = "") -> AbortResult:
        """/api/extra/abort: with a genkey, only that user's request, running or waiting.

        Without one, KoboldCpp's rule: the running request(s) without a genkey, or every
        running request when nobody waits.
        """
        with self._lock:
            if genkey:
                targets = [
                    j for j in [*self._running, *self._waiting] if j.request.genkey == genkey
                ][:1]
            else:
                targets = [j for j in self._running if not j.request.genkey or not self._waiting]
            self._counters.aborts += len(targets)
        for target in targets:
            self.cancel(target)
        return AbortResult(success=bool(targets), done=bool(targets))

    def abort_request(self, request_id: str) -> bool:
        """The admin's abort: every open job of that request (all of OpenAI's `n` choices),
        running or waiting, and no other. False when none is open."""
        with self._lock:
            targets = [
                j for j in [*self._running, *self._waiting] if j.request.request_id == request_id
            ]
            self._counters.aborts += len(targets)
        for target in targets:
            self.cancel(target)
        return bool(targets)

    def live_requests(self) -> LiveRequests:
        """What every open request is doing now, for the launcher's live view."""
        with self._lock:
            jobs = [*self._running, *self._waiting]
        rows = tuple(_live_row(job) for job in jobs)
        speed = sum(row.tokens_per_second for row in rows if row.state is LiveState.GENERATING)
        return LiveRequests(rows, speed)

    def text_for(self, genkey: str = "") -> str:
        """/api/extra/generate/check: a user's own text so far; never someone else's.

        A waiting request shows empty text. Without a genkey only an anonymous generation
        (one that also had no genkey) is visible, so keyed users stay private.
        """
        with self._lock:
            if genkey:
                job = self._find_by_genkey(genkey)
            else:
                anonymous = [j for j in self._running if not j.request.genkey]
                job = anonymous[0] if anonymous else None
                if job is None and not self._running:
                    job = self._last_finished
                if job is not None and job.request.genkey:
                    job = None
            if job is None or job.state is JobState.QUEUED:
                return ""
            return job.text

    def snapshot(self) -> QueueSnapshot:
        with self._lock:
            running, waiting = self._running_and_waiting()
        engine = self._engine
        if isinstance(engine, EnginePool):
            loaded = tuple(engine.loaded_names)
            return QueueSnapshot(
                waiting,
                running,
                self._perf,
                engine.current_name,
                loaded,
                engine.loading,
                tuple(engine.unloads_in(name) for name in loaded),
            )
        name = engine.model_name
        return QueueSnapshot(waiting, running, self._perf, name, (name,), None, (math.inf,))

    def take_metrics(self) -> MetricsReading:
        """The totals for /metrics; the throughput window restarts, as each llama-server
        scrape restarts it (its rates are over the time since the previous scrape)."""
        engine = self._engine
        counted = engine.decode_counts if isinstance(engine, CountsDecodes) else None
        with self._lock:
            counters = self._counters.copy()
            self._counters.restart_window()
            running, waiting = self._running_and_waiting()
            if counted is not None:
                # Read while the worker may be unloading a model (its decodes move from the
                # loaded to the unloaded total): never report less than before, or scrapers
                # would see a counter reset.
                reported = self._decodes_reported
                counted = DecodeCounts(
                    max(counted.calls, reported.calls), max(counted.busy_slots, reported.busy_slots)
                )
                self._decodes_reported = counted
        return MetricsReading(counters, running, waiting, counted)

    def count_admitted(self, source: str) -> None:
        """Count a request admitted through `source` (a dialect), for /metrics."""
        with self._lock:
            self._counters.admitted(source)

    def _running_and_waiting(self) -> tuple[int, int]:
        """(running, waiting), lock held. A job the worker has not picked up yet counts as
        running if a slot is free for it (as in `submit`); none is while a job that must run
        alone (grammar, embeddings, a model switch) holds the engine."""
        running = len(self._running)
        alone = any(not batchable(job.request) or job.request.model_only for job in self._running)
        free = 0 if alone else self._slots - running
        joining = min(len(self._waiting), max(free, 0))
        return running + joining, len(self._waiting) - joining

    def _in_flight(self) -> int:
        return len(self._waiting) + len(self._running)

    def _mark_running(self, job: Job) -> None:
        """Lock held: a job just taken from `_waiting` starts; its wait is measured."""
        job.state = JobState.RUNNING
        job.started_at = time.monotonic()
        self._running.append(job)
        self._counters.queue_wait.observe(job.started_at - job.submitted_at)

    # -- worker thread ----------------------------------------------------------------------

    def _seeded(self, request: GenerationRequest) -> GenerationRequest:
        """Pick the seed here so perf can report the one really used, as KoboldCpp does: the
        request's own, else the server's (--seed), else a random one."""
        if request.sampling.seed >= 0:
            return request
        seed = self._default_seed if self._default_seed >= 0 else random.randrange(1 << 31)
        return replace(request, sampling=replace(request.sampling, seed=seed))

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._waiting and not self._stopping and self._wait_for_work():
                    pass
                if self._stopping:
                    return
                needed = self._models_waiting()
                job = self._waiting.popleft() if self._waiting else None
                if job is not None:
                    self._mark_running(job)
            self._unload_expired(needed)
            if job is None:
                continue
            failure = self._use_model(job)
            if failure is None and job.request.model_only:
                failure = GenerationOutcome(FinishReason.STOP)
            self._finish(job, failure if failure is not None else self._run(job))

    # -- models (with an EnginePool): switching, keep_alive, unloading --------------------------

    def _wait_for_work(self) -> bool:
        """Wait (lock held) until notified or a keep_alive deadline passes; False when one
        has passed, so the worker goes and unloads."""
        expiry = self._engine.next_expiry() if isinstance(self._engine, EnginePool) else math.inf
        if expiry <= 0:
            return False
        # Capped: a keep_alive of years would overflow the lock's timeout (it wakes, waits on).
        self._lock.wait(None if math.isinf(expiry) else min(expiry, _LONGEST_WAIT_SECONDS))
        return True

    def _models_waiting(self) -> set[str | None]:
        """The models the waiting jobs will run on (lock held)."""
        pool = self._engine
        current = pool.model_name if isinstance(pool, EnginePool) else None
        return {job.request.model or current for job in self._waiting}

    def _unload_expired(self, needed: set[str | None]) -> None:
        if isinstance(self._engine, EnginePool):
            self._engine.unload_expired(needed)

    def _needs_switch(self, job: Job) -> bool:
        pool = self._engine
        if not isinstance(pool, EnginePool) or pool.embeds_apart(job.request):
            return False
        wanted = job.request.model
        return (
            job.request.model_only
            or pool.needs_load(wanted)
            or (wanted is not None and wanted != pool.current_name)
        )

    def _use_model(self, job: Job) -> GenerationOutcome | None:
        """Load the job's model if another is current (worker thread, outside the lock); the
        job's failure outcome when that fails (the models loaded before keep serving). A
        model-only job with keep_alive 0 unloads instead."""
        pool = self._engine
        if not isinstance(pool, EnginePool) or pool.embeds_apart(job.request):
            return None
        request = job.request
        if request.model_only and request.keep_alive == 0:
            pool.unload(request.model)
            return GenerationOutcome(FinishReason.STOP)
        try:
            pool.use(request.model)
        except EngineError as exc:
            logger.error("[%s] %s", request.request_id, exc)
            return GenerationOutcome(FinishReason.ERROR, error=str(exc))
        except Exception as exc:  # never the worker thread's end: only this job fails
            logger.exception("[%s] loading %s failed", request.request_id, request.model)
            return GenerationOutcome(FinishReason.ERROR, error=str(exc))
        return None

    def _keep_alive_after(self, job: Job) -> None:
        """Start the job's model's keep_alive clock once the job is over (worker thread)."""
        pool, request = self._engine, job.request
        if not isinstance(pool, EnginePool) or (request.model_only and request.keep_alive == 0):
            return
        if pool.embeds_apart(request):
            return
        name = request.model or pool.model_name
        if name in pool.loaded_names:
            pool.keep_alive(name, -1 if request.keep_alive is None else request.keep_alive)

    def _work_batched(self) -> None:
        """Continuous batching: admit into free slots, step the engine, deliver, repeat."""
        assert isinstance(self._engine, BatchEngine)
        engine = self._engine
        handles: dict[object, Job] = {}
        while True:
            admitted: list[Job] = []
            alone: Job | None = None
            switching: Job | None = None
            with self._lock:
                while (
                    not self._waiting
                    and not handles
                    and not self._stopping
                    and self._wait_for_work()
                ):
                    pass
                if self._stopping:
                    return
                # Only between batches (not at every step): nothing runs, so a model whose
                # keep_alive ran out may go.
                needed = None if handles else self._models_waiting()
            if needed is not None:
                self._unload_expired(needed)
            with self._lock:
                while self._waiting and len(handles) + len(admitted) < self._slots:
                    job = self._waiting[0]
                    if self._needs_switch(job):
                        # Another model: after the batch drains (arrival order across models)
                        if not handles and not admitted:
                            switching = self._waiting.popleft()
                            self._mark_running(switching)
                        break
                    if not batchable(job.request):
                        if not handles and not admitted:
                            alone = self._waiting.popleft()
                            self._mark_running(alone)
                        break  # it waits for the batch to drain; later arrivals wait behind it
                    self._waiting.popleft()
                    self._mark_running(job)
                    admitted.append(job)
            if switching is not None:
                failure = self._use_model(switching)
                if failure is None and switching.request.model_only:
                    failure = GenerationOutcome(FinishReason.STOP)
                if failure is not None:
                    self._finish(switching, failure)
                    continue
                if batchable(switching.request):
                    admitted.append(switching)
                else:
                    alone = switching
            if alone is not None:
                logger.info(
                    "[%s] Batching disabled due to %s",
                    alone.request.request_id,
                    unbatchable_reason(alone.request),
                )
                self._finish(alone, self._run(alone))
                continue
            for job in admitted:
                try:
                    handles[engine.start_sequence(self._seeded(job.request), job.cancelled)] = job
                except Exception as exc:
                    logger.exception("could not start %s", job.request.request_id)
                    self._finish(job, GenerationOutcome(FinishReason.ERROR, error=str(exc)))
            if not handles:
                continue
            try:
                events = engine.step()
            except Exception as exc:
                logger.exception("batched decode failed")
                for job in handles.values():
                    self._finish(job, GenerationOutcome(FinishReason.ERROR, error=str(exc)))
                handles.clear()
                continue
            for handle, event in events:
                job = handles[handle]
                if isinstance(event, Progress):
                    job.progress = job.progress.advanced(event, time.monotonic())
                elif isinstance(event, GenerationOutcome):
                    del handles[handle]
                    self._finish(job, event)
                else:
                    if isinstance(event, TokenEvent):
                        job.text_parts.append(event.text)
                    job.deliver(event)

    def _finish(self, job: Job, outcome: GenerationOutcome) -> None:
        self._keep_alive_after(job)
        outcome = _as_shutdown(job, outcome)
        with self._lock:
            self._running.remove(job)
            self._record_finished(job, outcome)
        job.deliver(outcome)
        self._report(job)

    def _run(self, job: Job) -> GenerationOutcome:
        request = self._seeded(job.request)
        try:
            for event in self._engine.generate(request, job.cancelled):
                if isinstance(event, GenerationOutcome):
                    return event
                if isinstance(event, Progress):
                    job.progress = job.progress.advanced(event, time.monotonic())
                    continue
                if isinstance(event, TokenEvent):
                    job.text_parts.append(event.text)
                elif isinstance(event, EmbeddingsEvent):
                    job.embeddings = event
                job.deliver(event)
        except Exception as exc:
            logger.exception("generation %s failed", request.request_id)
            return GenerationOutcome(FinishReason.ERROR, seed=request.sampling.seed, error=str(exc))
        return GenerationOutcome(FinishReason.ERROR, error="engine ended without an outcome")

    def _finish_without_running(self, job: Job) -> None:
        outcome = _as_shutdown(job, GenerationOutcome(FinishReason.CANCELLED))
        with self._lock:
            self._record_finished(job, outcome)
        job.deliver(outcome)
        self._report(job)

    def _record_finished(self, job: Job, outcome: GenerationOutcome) -> None:
        """Book-keeping under the lock once a job is over."""
        job.state = JobState.DONE
        job.outcome = outcome
        ran = outcome.prompt_tokens > 0 or outcome.completion_tokens > 0
        if job.request.model_only or job.request.embed_inputs:
            pass  # a model load or unload, or embeddings: not a generation for perf
        elif ran or outcome.finish_reason is not FinishReason.CANCELLED:
            self._counters.record_outcome(outcome)
            self._perf.last_outcome = outcome
            self._perf.total_gens += 1
            self._last_finished = job
        key = job.request.genkey
        if key:
            self._finished_by_genkey[key] = job
            self._finished_by_genkey.move_to_end(key)
            while len(self._finished_by_genkey) > _REMEMBERED_GENKEYS:
                self._finished_by_genkey.popitem(last=False)

    def _find_by_genkey(self, genkey: str) -> Job | None:
        for job in [*self._running, *self._waiting]:
            if job.request.genkey == genkey:
                return job
        return self._finished_by_genkey.get(genkey)

    def _report(self, job: Job) -> None:
        if self._on_finished is not None:
            try:
                self._on_finished(job)
            except Exception:
                logger.exception("finished-request callback failed")


def _as_shutdown(job: Job, outcome: GenerationOutcome) -> GenerationOutcome:
    """A job cut short by `shut_down` ends as a failure that says so, whatever the engine
    reported (it only saw a cancellation)."""
    if not job.stopped_by_shutdown or outcome.finish_reason is not FinishReason.CANCELLED:
        return outcome
    return replace(
        outcome, finish_reason=FinishReason.ERROR, error=SHUTDOWN_MESSAGE, server_stopping=True
    )


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
        state,
        progress.prompt_done,
        progress.prompt_total,
        progress.generated,
        progress.tokens_per_second(),
    )


def unbatchable_reason(request: GenerationRequest) -> str | None:
    """Why a request must run alone (KoboldCpp's list, for what Hearth supports)."""
    if request.embed_inputs:
        return "embeddings"  # their own context, several inputs in one decode
    if request.json_schema is not None:
        return "grammar (tool call or JSON format)"
    if request.grammar is not None:
        return "grammar"
    return None


def batchable(request: GenerationRequest) -> bool:
    return unbatchable_reason(request) is None
