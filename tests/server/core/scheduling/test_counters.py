"""The plain counters behind /metrics (server/core/scheduling/counters.py) and how the scheduler and
the engine pool keep them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from server.core.scheduling.counters import (
    QUEUE_WAIT_BUCKETS,
    DecodeCounts,
    ServerCounters,
    WaitHistogram,
)
from server.core.scheduling.engine import Engine
from server.core.scheduling.engine_pool import EnginePool
from server.core.scheduling.job import JobState
from server.core.scheduling.scheduler import Scheduler
from server.core.types import FinishReason, GenerationOutcome, GenerationRequest
from tests.support.scripted_engine import ScriptedEngine


def test_a_wait_on_a_bucket_bound_falls_in_that_bucket() -> None:
    histogram = WaitHistogram()
    for seconds in (0.0, QUEUE_WAIT_BUCKETS[0], 0.007, 1000.0):
        histogram.observe(seconds)
    buckets = dict(histogram.cumulative())
    assert buckets[QUEUE_WAIT_BUCKETS[0]] == 2
    assert buckets[QUEUE_WAIT_BUCKETS[1]] == 3
    assert buckets[QUEUE_WAIT_BUCKETS[-1]] == 3
    assert buckets[float("inf")] == histogram.observations == 4


def test_an_outcome_counts_like_llama_server() -> None:
    counters = ServerCounters()
    counters.record_outcome(
        GenerationOutcome(
            FinishReason.LENGTH,
            prompt_tokens=100,
            reused_prompt_tokens=90,
            completion_tokens=11,
            prompt_seconds=0.5,
            generation_seconds=2.0,
        )
    )
    # cached prompt tokens apart; the first generated token cost no decode step of its own
    assert (counters.prompt.tokens, counters.prompt_cached_tokens) == (10, 90)
    assert (counters.predicted.tokens, counters.predicted.steps) == (11, 10)
    assert counters.predicted.per_second() == 5.0
    assert counters.prompt.per_second() == 20.0
    assert counters.longest_sequence == 111
    snapshot = counters.copy()
    counters.restart_window()
    assert counters.predicted_window.per_second() == 0.0
    assert snapshot.predicted_window.per_second() == 5.0  # a copy is not restarted with it


def test_the_scheduler_measures_the_wait_and_restarts_the_window_per_scrape() -> None:
    engine = ScriptedEngine(token_seconds=0.002)

    async def main() -> None:
        scheduler = Scheduler(engine, multiuser=5)
        scheduler.start()
        try:
            first = scheduler.submit(GenerationRequest("a", "first", max_tokens=20))
            second = scheduler.submit(GenerationRequest("b", "second", max_tokens=3))
            await asyncio.gather(scheduler.collect(first), scheduler.collect(second))
            assert first.started_at is not None and second.started_at is not None
            waited = second.started_at - second.submitted_at
            reading = scheduler.take_metrics()
            wait = reading.counters.queue_wait
            assert wait.observations == 2
            assert wait.total_seconds >= waited > 0  # the second waited for the first
            assert reading.counters.predicted.tokens == 23
            assert reading.counters.predicted_window.tokens == 23
            assert scheduler.take_metrics().counters.predicted_window.tokens == 0
            assert scheduler.take_metrics().counters.predicted.tokens == 23
        finally:
            scheduler.stop()

    asyncio.run(main())


def test_a_waiter_cancelled_before_it_ran_adds_no_wait() -> None:
    engine = ScriptedEngine(token_seconds=0.01)

    async def main() -> None:
        scheduler = Scheduler(engine, multiuser=5)
        scheduler.start()
        try:
            running = scheduler.submit(GenerationRequest("a", "run", max_tokens=500))
            waiting = scheduler.submit(GenerationRequest("b", "wait", max_tokens=3))
            while running.state is not JobState.RUNNING:
                await asyncio.sleep(0.001)
            scheduler.cancel(waiting)
            scheduler.cancel(running)
            await asyncio.gather(scheduler.collect(running), scheduler.collect(waiting))
            assert scheduler.take_metrics().counters.queue_wait.observations == 1
        finally:
            scheduler.stop()

    asyncio.run(main())


class CountingEngine(ScriptedEngine):
    """A scripted engine that reports decode counts, as LlamaCppEngine does."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.decode_counts = DecodeCounts(calls, calls * 2)


def test_the_pool_keeps_the_decodes_of_unloaded_models() -> None:
    def load(path: Path) -> Engine:
        return CountingEngine(5)

    pool = EnginePool("a", CountingEngine(3), {"a": Path("a"), "b": Path("b")}, load)
    assert pool.decode_counts == DecodeCounts(3, 6)
    pool.use("b")  # one model at a time: "a" is unloaded
    assert pool.loaded_names == ["b"]
    assert pool.decode_counts == DecodeCounts(8, 16)
    reading = Scheduler(pool).take_metrics()
    assert reading.decodes == DecodeCounts(8, 16)
    assert Scheduler(ScriptedEngine()).take_metrics().decodes is None
