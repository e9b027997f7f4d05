"""The models' side of the worker: which model a job needs, loading it between jobs, keep_alive.

The scheduler always works on an `EnginePool` (server/core/engine_pool.py), a pool of one when
one model is served. `ModelLifecycle` holds the rules that tie the pool to the line of jobs:
a job naming another model (or loading or unloading one) waits for the running ones to end;
a model whose keep_alive ran out is closed between jobs unless a waiting job needs it; after a
job, its model's keep_alive clock starts. The worker thread is its only caller, so models are
loaded, used and closed on one thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from server.core.engine import EngineError
from server.core.engine_pool import EnginePool
from server.core.job import Job
from server.core.types import FinishReason, GenerationOutcome

logger = logging.getLogger(__name__)


class ModelLifecycle:
    def __init__(self, pool: EnginePool) -> None:
        self.pool = pool

    def seconds_to_next_unload(self) -> float:
        """Seconds until a keep_alive runs out (inf: none will), so the idle worker wakes."""
        return self.pool.next_expiry()

    def models_needed(self, waiting: Iterable[Job]) -> set[str | None]:
        """The models the waiting jobs will run on (call with the queue's lock held)."""
        current = self.pool.model_name
        return {job.request.model or current for job in waiting}

    def unload_expired(self, needed: set[str | None]) -> None:
        """Close the models whose keep_alive ran out, except those in `needed`."""
        self.pool.unload_expired(needed)

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
        except EngineError as exc:
            logger.error("[%s] %s", request.request_id, exc)
            return GenerationOutcome(FinishReason.ERROR, error=str(exc))
        except Exception as exc:  # never the worker thread's end: only this job fails
            logger.exception("[%s] loading %s failed", request.request_id, request.model)
            return GenerationOutcome(FinishReason.ERROR, error=str(exc))
        return None

    def keep_alive_after(self, job: Job) -> None:
        """Start the job's model's keep_alive clock once the job is over."""
        pool, request = self.pool, job.request
        if (request.model_only and request.keep_alive == 0) or pool.embeds_apart(request):
            return
        name = request.model or pool.model_name
        if name in pool.loaded_names:
            pool.keep_alive(name, -1 if request.keep_alive is None else request.keep_alive)
