"""KoboldCpp's request queue, done better: a fair order, and every place freed at once.

One worker thread owns the engine. With `--parallelrequests N` (an engine with N slots) it runs
up to N requests together, one engine `step()` at a time, admitting newcomers as slots free up
(continuous batching); grammar-bound ones (tool calls, JSON formats) batch too, unlike
KoboldCpp. A request that cannot be batched (a slot action, embeddings) waits until the batch
drains and then runs alone.

Requests from the event loop are admitted (or refused when the queue is full) synchronously by
`submit`, so the refusal can still be a real HTTP 503 before any byte of a response goes out.
Each job (`job.py`) carries an inbox the worker appends to and an `asyncio.Event` it sets
through `loop.call_soon_threadsafe`, the only crossing point between the two worlds.

`Scheduler` is the front the dialects and the process use; the work is done by its parts, in
this package: `request_queue` (the line and its rules: places, fair order, aborts, genkeys),
`worker` (the generation thread, one job at a time or batched), `model_lifecycle` (the models
behind it: switching, keep_alive, unloading; always an `EnginePool`, a pool of one around a
single engine) and `observation` (the readings: perf's snapshot, /metrics, the live view).

Differences from KoboldCpp (koboldcpp-behaviour.md §2), on purpose:
- waiters are served in turn across owners (API keys, else client addresses), each owner's
  first come, first served (KoboldCpp's lock gives no order); `--multiuserperkey` bounds
  one owner's requests in flight within `--multiuser`;
- an aborted or abandoned waiter leaves the queue immediately instead of at its turn;
- several pending aborts can exist (KoboldCpp keeps a single `pendingabortkey`);
- abort, /check, disconnects and perf see batched requests too (KoboldCpp's do not);
- a client that stops reading its stream cannot hold a slot: once `max_pending` of its events
  are unread, its generation is aborted and its stream dropped (`Job.abandoned`);
- at shutdown every open request gets an ending (`shut_down`), not a cut connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from server.base.defaults import DEFAULT_MULTIUSER
from server.core.scheduling.engine import Engine
from server.core.scheduling.engine_pool import EnginePool
from server.core.scheduling.job import DEFAULT_MAX_PENDING_EVENTS, Job, JobState
from server.core.scheduling.model_lifecycle import ModelLifecycle
from server.core.scheduling.observation import (
    LiveRequest,
    LiveRequests,
    LiveState,
    MetricsReading,
    Observer,
    QueueSnapshot,
)
from server.core.scheduling.request_queue import (
    AbortResult,
    OwnerShare,
    OwnerShareFullError,
    PerfCounters,
    QueueFullError,
    QueueLine,
    RequestQueue,
    batchable,
    unbatchable_reason,
    waiting_places,
)
from server.core.scheduling.worker import SHUTDOWN_MESSAGE, FinishedCallback, Worker
from server.core.types import EngineReport, GenerationOutcome, GenerationRequest, TokenEvent

# The names other layers import from here, wherever they are defined now.
__all__ = [
    "SHUTDOWN_MESSAGE",
    "AbortResult",
    "FinishedCallback",
    "LiveRequest",
    "LiveRequests",
    "LiveState",
    "MetricsReading",
    "OwnerShare",
    "OwnerShareFullError",
    "PerfCounters",
    "QueueFullError",
    "QueueLine",
    "QueueSnapshot",
    "Scheduler",
    "batchable",
    "unbatchable_reason",
    "waiting_places",
]


class Scheduler:
    """Runs generations in a fair order (one at a time, or batched), with a bounded line."""

    def __init__(
        self,
        engine: Engine | EnginePool,
        multiuser: int = DEFAULT_MULTIUSER,
        on_finished: FinishedCallback | None = None,
        max_pending_events: int = DEFAULT_MAX_PENDING_EVENTS,
        default_seed: int = -1,
        owner_share: int = 0,
        sleep_idle_seconds: float = -1,
    ) -> None:
        """`multiuser`: KoboldCpp's --multiuser (requests in flight, the running ones
        counted); `owner_share`: --multiuserperkey, the most one owner may have (0: any);
        `sleep_idle_seconds`: llama-server's, every model closed after that long without work
        (negative: never)."""
        # The one place a bare engine is told apart: from here on, the models are a pool.
        pool = engine if isinstance(engine, EnginePool) else EnginePool.of_one(engine)
        slots = pool.parallel_slots
        self._max_pending = max_pending_events
        self._queue = RequestQueue(slots, waiting_places(multiuser, slots), owner_share)
        self._models = ModelLifecycle(pool, sleep_idle_seconds)
        self._worker = Worker(self._queue, self._models, default_seed, on_finished)
        self._observer = Observer(self._queue, pool)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def parallel_slots(self) -> int:
        return self._queue.slots

    def start(self) -> None:
        self._worker.start()

    def shut_down(self) -> None:
        """End every open request with a shutdown outcome and admit no more (503).

        Call from the event loop before the HTTP server closes its connections: waiting
        requests end at once, running ones within a token, so each stream can send its
        dialect's ending instead of being cut off. `idle()` says when all are done.
        """
        running, waiting = self._queue.close()
        for job in running + waiting:
            job.stopped_by_shutdown = True
            job.cancelled.set()  # a running job ends within a token
        for job in waiting:
            self._worker.finish_unrun(job)

    def idle(self) -> bool:
        return self._queue.idle()

    def stop(self) -> None:
        """Cancel everything, stop the worker and wait for it (the engine is then idle)."""
        for job in self._queue.stop():
            self._worker.finish_unrun(job)
        self._worker.join()

    # -- admission and consumption (event-loop thread) -------------------------------------

    def submit(self, request: GenerationRequest) -> Job:
        """Admit a request or raise `QueueFullError` (`OwnerShareFullError` when its owner's
        share is full). Call from the event loop's thread."""
        job = Job(request=request, loop=asyncio.get_running_loop(), max_pending=self._max_pending)
        self._queue.admit(job)
        return job

    async def event_batches(
        self, job: Job, idle_timeout: float | None = None
    ) -> AsyncIterator[list[EngineReport] | None]:
        """Yield a job's events in batches of whatever has arrived, until its outcome (with
        Progress reports among them while the prompt is read, when the request asked).

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
                self._queue.count_disconnect()
            if job.state is not JobState.DONE:
                self.cancel(job)

    async def events(
        self, job: Job, idle_timeout: float | None = None
    ) -> AsyncIterator[EngineReport | None]:
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
        if self._queue.take_out(job):
            self._worker.finish_unrun(job)
        # else: running (the worker sees the flag) or already done

    def abort(self, genkey: str = "") -> AbortResult:
        """/api/extra/abort: with a genkey, only that user's request, running or waiting.

        Without one, KoboldCpp's rule: the running request(s) without a genkey, or every
        running request when nobody waits.
        """
        targets = self._queue.abort_targets(genkey)
        for target in targets:
            self.cancel(target)
        return AbortResult(success=bool(targets), done=bool(targets))

    def abort_request(self, request_id: str) -> bool:
        """The admin's abort: every open job of that request (all of OpenAI's `n` choices),
        running or waiting, and no other. False when none is open."""
        targets = self._queue.request_targets(request_id)
        for target in targets:
            self.cancel(target)
        return bool(targets)

    def count_admitted(self, source: str) -> None:
        """Count a request admitted through `source` (a dialect), for /metrics."""
        self._queue.count_admitted(source)

    # -- readings (any thread) --------------------------------------------------------------

    def text_for(self, genkey: str = "") -> str:
        """/api/extra/generate/check: a user's own text so far; never someone else's."""
        return self._queue.text_for(genkey)

    def snapshot(self) -> QueueSnapshot:
        return self._observer.snapshot()

    @property
    def sleeping(self) -> bool:
        """--sleep-idle-seconds closed the models and no request has woken them yet."""
        return self._models.sleeping

    @property
    def slept_models(self) -> frozenset[str]:
        """The models the sleep closed (empty once a request loads one again)."""
        return self._models.slept

    def slot_tokens(self) -> list[int]:
        return self._observer.slot_tokens()

    def queue_line(self) -> QueueLine:
        """The line by owner labels, for /api/extra/perf and the launcher's queue table."""
        with self._queue.lock:
            return self._queue.line_locked()

    def take_metrics(self) -> MetricsReading:
        """The totals for /metrics (the throughput window restarts with each reading)."""
        return self._observer.take_metrics()

    def live_requests(self) -> LiveRequests:
        """What every open request is doing now, for the launcher's live view."""
        return self._observer.live_requests()
