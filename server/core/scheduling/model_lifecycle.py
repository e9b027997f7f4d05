"""The models' side of the worker: which model a job needs, loading it between jobs, keep_alive.

The scheduler always works on an `EnginePool` (server/core/scheduling/engine_pool.py), a pool of one
when one model is served. `ModelLifecycle` holds the rules that tie the pool to the line of jobs:
a job naming another model (or loading or unloading one) waits for the running ones to end;
a model whose keep_alive ran out is closed between jobs unless a waiting job needs it; after a
job, its model's keep_alive clock starts. The worker thread is its only caller, so models are
loaded, used and closed on one thread.

Sleeping (llama-server's --sleep-idle-seconds): once no job has run for that long, every
loaded model is closed between jobs, and the next job that needs one loads it again (a job
naming no model gets the one the server slept on). Other threads read `sleeping` and `slept`
(plain attributes, replaced whole) for /props and the router's /models.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable

from server.core.scheduling.engine import EngineError
from server.core.scheduling.engine_pool import EnginePool
from server.core.scheduling.job import Job
from server.core.types import FinishReason, GenerationOutcome

logger = logging.getLogger(__name__)


class ModelLifecycle:
    def __init__(
        self,
        pool: EnginePool,
        sleep_after: float = -1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`sleep_after`: seconds without work before every model is closed (negative: never;
        a pool of one never sleeps, since nothing could load its engine again)."""
        self.pool = pool
        self._sleep_after = sleep_after if sleep_after >= 0 and pool.can_unload else math.inf
        self._clock = clock
        self._idle_since = clock()  # the end of the last job (or the start)
        # The models the sleep closed, until a job loads one again (any thread reads it).
        self.slept: frozenset[str] = frozenset()

    @property
    def sleeping(self) -> bool:
        """Asleep: the sleep closed the models and no job has loaded one since (any thread)."""
        pool = self.pool
        return bool(self.slept) and not pool.loaded_names and pool.loading is None

    def seconds_to_next_unload(self) -> float:
        """Seconds until a keep_alive runs out or the server falls asleep (inf: neither will),
        so the idle worker wakes."""
        return min(self.pool.next_expiry(), self._seconds_to_sleep())

    def _seconds_to_sleep(self) -> float:
        if math.isinf(self._sleep_after) or not self.pool.loaded_names:
            return math.inf
        return max(0.0, self._idle_since + self._sleep_after - self._clock())

    def models_needed(self, waiting: Iterable[Job]) -> set[str | None]:
        """The models the waiting jobs will run on (call with the queue's lock held)."""
        current = self.pool.model_name
        return {job.request.model or current for job in waiting}

    def unload_expired(self, needed: set[str | None]) -> None:
        """Close the models whose keep_alive ran out, except those in `needed`; with no job
        waiting and none run for --sleep-idle-seconds, close them all (sleep)."""
        self.pool.unload_expired(needed)
        if not needed and self._seconds_to_sleep() <= 0:
            closed = self.pool.unload()
            if closed:
                self.slept = frozenset(closed)
                logger.info("Sleeping: no work for %g s, %s unloaded", self._sleep_after, closed)

    def needs_switch(self, job: Job) -> bool:
        """Whether the job must have the engine to itself first: it names a model other than
        the current one (or one not loaded), or it only loads or unloads a model."""
        pool, request = self.pool, job.request
        if pool.embeds_apart(request):
            return False
        return request.model_only or pool.switch_needed(request.model)

    def prepare(self, job: Job) -> GenerationOutcome | None:
        """Make the job's model current, loading it if needed; the job's outcome when it ends
        here without generating: a failed load (the models loaded before keep serving), or a
        model-only job (loaded; with keep_alive 0, unloaded instead)."""
        request = job.request
        if not self.pool.embeds_apart(request):
            failure = self._use_model(job)
            if failure is not None:
                return failure
        return GenerationOutcome(FinishReason.STOP) if request.model_only else None

    def _use_model(self, job: Job) -> GenerationOutcome | None:
        pool, request = self.pool, job.request
        if request.model_only and request.keep_alive == 0:
            pool.unload(request.model)
            return GenerationOutcome(FinishReason.STOP)
        try:
            pool.use(request.model)
            self.slept = frozenset()  # awake: the other models are merely unloaded now
        except EngineError as exc:
            logger.error("[%s] %s", request.request_id, exc)
            return GenerationOutcome(FinishReason.ERROR, error=str(exc))
        except Exception as exc:  # never the worker thread's end: only this job fails
            logger.exception("[%s] loading %s failed", request.request_id, request.model)
            return GenerationOutcome(FinishReason.ERROR, error=str(exc))
        return None

    def keep_alive_after(self, job: Job) -> None:
        """Start the job's model's keep_alive clock (and the sleep's) once the job is over."""
        pool, request = self.pool, job.request
        self._idle_since = self._clock()
        if (request.model_only and request.keep_alive == 0) or pool.embeds_apart(request):
            return
        name = request.model or pool.model_name
        if name in pool.loaded_names:
            pool.keep_alive(name, -1 if request.keep_alive is None else request.keep_alive)
