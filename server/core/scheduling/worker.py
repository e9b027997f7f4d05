"""The generation thread: the one owner of the engine, taking jobs from the line and ending them.

With one slot it runs one job at a time (`run_one_at_a_time`). With `--parallelrequests N`
(an engine with N slots) it batches continuously (`run_batched`): plain requests join free
slots between two engine `step()`s, while a job that cannot be batched (grammar, embeddings)
or that needs another model waits until the batch drains and then has the engine alone.

Events go to the event loop through each job's inbox (`Job.deliver`); ending a job (`finish`)
records it in the queue, hands over its outcome and tells the request log.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from server.core.scheduling.engine import failure_outcome
from server.core.scheduling.job import Job
from server.core.scheduling.model_lifecycle import ModelLifecycle
from server.core.scheduling.request_queue import RequestQueue, batchable, unbatchable_reason
from server.core.types import (
    EmbeddingsEvent,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    Progress,
    TokenEvent,
)

logger = logging.getLogger(__name__)

_LONGEST_WAIT_SECONDS = 3600.0
SHUTDOWN_MESSAGE = "Hearth is shutting down; the request was not finished."

FinishedCallback = Callable[[Job], None]
Batch = dict[object, Job]  # the running sequences: the engine's handle → its job


@dataclass(slots=True)
class _Turn:
    """What the batching worker takes from the line between two engine steps."""

    joining: list[Job] = field(default_factory=list)  # start in free slots now
    alone: Job | None = None  # has the engine to itself (the batch has drained)
    switching: Job | None = None  # needs another model first (the batch has drained)


class Worker:
    def __init__(
        self,
        queue: RequestQueue,
        models: ModelLifecycle,
        default_seed: int = -1,
        on_finished: FinishedCallback | None = None,
    ) -> None:
        self._queue = queue
        self._models = models
        self._default_seed = default_seed  # for requests without a seed; -1: random
        self._on_finished = on_finished
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        work = self.run_batched if self._queue.slots > 1 else self.run_one_at_a_time
        self._thread = threading.Thread(target=work, name="hearth-generation", daemon=True)
        self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    # -- one job at a time -------------------------------------------------------------------

    def run_one_at_a_time(self) -> None:
        queue = self._queue
        while True:
            with queue.lock:
                while not queue.waiting and not queue.stopping and self._wait_for_work_locked():
                    pass
                if queue.stopping:
                    return
                needed = self._models.models_needed(queue.waiting)
                job = queue.take_next_locked() if queue.waiting else None
            self._models.unload_expired(needed)
            if job is None:
                continue
            ended = self._models.prepare(job)
            self.finish(job, ended if ended is not None else self._run(job))

    def _run(self, job: Job) -> GenerationOutcome:
        request = self._seeded(job.request)
        try:
            for event in self._models.pool.generate(request, job.cancelled):
                if isinstance(event, GenerationOutcome):
                    return event
                if isinstance(event, Progress):
                    job.progress = job.progress.advanced(event, time.monotonic())
                    job.report_progress(event)
                    continue
                if isinstance(event, TokenEvent):
                    job.text_parts.append(event.text)
                elif isinstance(event, EmbeddingsEvent):
                    job.embeddings = event
                job.deliver(event)
        except Exception as exc:
            logger.exception("generation %s failed", request.request_id)
            return replace(failure_outcome(exc), seed=request.sampling.seed)
        return GenerationOutcome(FinishReason.ERROR, error="engine ended without an outcome")

    # -- continuous batching -----------------------------------------------------------------

    def run_batched(self) -> None:
        """Admit into free slots, step the engine, deliver, repeat."""
        batch: Batch = {}
        while self._wait_for_turn(batch):
            turn = self._take_turn(batch)
            if turn.switching is not None and not self._switch_model(turn):
                continue
            if turn.alone is not None:
                alone = turn.alone
                reason = unbatchable_reason(alone.request)
                logger.info("[%s] Batching disabled due to %s", alone.request.request_id, reason)
                self.finish(alone, self._run(alone))
                continue
            self._start_sequences(turn.joining, batch)
            if batch:
                self._step(batch)

    def _wait_for_turn(self, batch: Batch) -> bool:
        """Wait until there is work (or a batch runs); False when the worker must stop. Only
        between batches (not at every step), with nothing running, a model whose keep_alive
        ran out may go."""
        queue = self._queue
        with queue.lock:
            while (
                not queue.waiting
                and not batch
                and not queue.stopping
                and self._wait_for_work_locked()
            ):
                pass
            if queue.stopping:
                return False
            needed = None if batch else self._models.models_needed(queue.waiting)
        if needed is not None:
            self._models.unload_expired(needed)
        return True

    def _take_turn(self, batch: Batch) -> _Turn:
        """Take from the line what may start now, in its (fair) order: plain requests into the
        free slots; a job that needs the engine alone (or another model) only once nothing
        runs, and whoever comes after it in the line waits behind it. While a running job is
        cancelled but not yet ended, nobody joins: its slot frees at the next step, and the
        jobs of one abort (marked together, under the lock) all leave before any newcomer
        starts, so those waiting behind them start together."""
        queue, turn, running = self._queue, _Turn(), len(batch)
        with queue.lock:
            if any(job.cancelled.is_set() for job in batch.values()):
                return turn
            while queue.waiting and running + len(turn.joining) < queue.slots:
                job = queue.waiting[0]
                first = running == 0 and not turn.joining
                if self._models.needs_switch(job):
                    if first:
                        turn.switching = queue.take_next_locked()
                    break
                if not batchable(job.request):
                    if first:
                        turn.alone = queue.take_next_locked()
                    break
                turn.joining.append(queue.take_next_locked())
        return turn

    def _switch_model(self, turn: _Turn) -> bool:
        """Make the switching job's model current; False when the job ended there (a failed
        load, or it only loaded or unloaded a model). Otherwise it joins or runs alone."""
        job = turn.switching
        assert job is not None
        ended = self._models.prepare(job)
        if ended is not None:
            self.finish(job, ended)
            return False
        if batchable(job.request):
            turn.joining.append(job)
        else:
            turn.alone = job
        return True

    def _start_sequences(self, joining: list[Job], batch: Batch) -> None:
        pool = self._models.pool
        for job in joining:
            try:
                batch[pool.start_sequence(self._seeded(job.request), job.cancelled)] = job
            except Exception as exc:
                logger.exception("could not start %s", job.request.request_id)
                self.finish(job, failure_outcome(exc))

    def _step(self, batch: Batch) -> None:
        """One decode for every running sequence, and its events to their jobs."""
        try:
            events = self._models.pool.step()
        except Exception as exc:
            logger.exception("batched decode failed")
            for job in batch.values():
                self.finish(job, GenerationOutcome(FinishReason.ERROR, error=str(exc)))
            batch.clear()
            return
        for handle, event in events:
            job = batch[handle]
            if isinstance(event, Progress):
                job.progress = job.progress.advanced(event, time.monotonic())
                job.report_progress(event)
            elif isinstance(event, GenerationOutcome):
                del batch[handle]
                self.finish(job, event)
            else:
                if isinstance(event, TokenEvent):
                    job.text_parts.append(event.text)
                job.deliver(event)

    # -- both --------------------------------------------------------------------------------

    def _wait_for_work_locked(self) -> bool:
        """Wait until notified or a keep_alive deadline passes; False when one has passed,
        so the worker goes and unloads."""
        expiry = self._models.seconds_to_next_unload()
        if expiry <= 0:
            return False
        # Capped: a keep_alive of years would overflow the lock's timeout (it wakes, waits on).
        self._queue.lock.wait(None if math.isinf(expiry) else min(expiry, _LONGEST_WAIT_SECONDS))
        return True

    def _seeded(self, request: GenerationRequest) -> GenerationRequest:
        """Pick the seed here so perf can report the one really used, as KoboldCpp does: the
        request's own, else the server's (--seed), else a random one."""
        if request.sampling.seed >= 0:
            return request
        seed = self._default_seed if self._default_seed >= 0 else random.randrange(1 << 31)
        return replace(request, sampling=replace(request.sampling, seed=seed))

    def finish(self, job: Job, outcome: GenerationOutcome) -> None:
        """End a job that ran: its model's keep_alive starts, its outcome goes out."""
        self._models.keep_alive_after(job)
        self._end(job, outcome, was_running=True)

    def finish_unrun(self, job: Job) -> None:
        """End a job taken out of the line before it ran (cancelled, or the server stops)."""
        self._end(job, GenerationOutcome(FinishReason.CANCELLED), was_running=False)

    def _end(self, job: Job, outcome: GenerationOutcome, was_running: bool) -> None:
        outcome = _as_shutdown(job, outcome)
        self._queue.record_finished(job, outcome, was_running)
        job.deliver(outcome)
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
