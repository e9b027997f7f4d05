"""EnginePool in the scheduler (issue 12's model switching, in progress): jobs run on the model
they name, in arrival order across models, least recently used evicted, and a model that fails
to load fails only the job that asked for it."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from server.core.caching.prompt_cache import PromptCache, PromptCacheStats, SavedState
from server.core.scheduling.engine import CachesPrompts, Engine, EngineError
from server.core.scheduling.engine_pool import EnginePool
from server.core.scheduling.observation import Observer
from server.core.scheduling.request_queue import RequestQueue
from server.core.scheduling.scheduler import Scheduler
from server.core.types import FinishReason, GenerationRequest
from tests.support.scripted_engine import CachingScriptedEngine, ScriptedEngine


class Models:
    """A loader of scripted engines that answer with their model's name; it records loads and
    closes (`closed` is set by each), and fails for a path named 'broken'."""

    def __init__(self) -> None:
        self.loads: list[str] = []
        self.open: dict[str, ScriptedEngine] = {}
        self.closed = threading.Event()

    def engine(self, name: str) -> ScriptedEngine:
        engine = ClosingEngine(self, name, pieces=(name.encode(),), end_after=1)
        self.open[name] = engine
        return engine

    def load(self, path: Path) -> Engine:
        if path.name == "broken":
            raise EngineError(f"{path}: llama.cpp could not load this model file")
        self.loads.append(path.name)
        return self.engine(path.name)


class ClosingEngine(ScriptedEngine):
    def __init__(self, models: Models, name: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._models, self._label = models, name

    @property
    def model_path(self) -> Path | None:
        return Path(self._label)

    def close(self) -> None:
        self._models.open.pop(self._label, None)
        self._models.closed.set()


def request(name: str, model: str | None) -> GenerationRequest:
    return dataclasses.replace(
        GenerationRequest(request_id=name, prompt="x", max_tokens=3), model=model
    )


def run_jobs(pool: EnginePool, asked: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    async def main() -> list[tuple[str, str]]:
        scheduler = Scheduler(pool, multiuser=20)
        scheduler.start()
        try:
            jobs = [scheduler.submit(request(rid, model)) for rid, model in asked]
            answers = await asyncio.gather(*(scheduler.collect(job) for job in jobs))
        finally:
            scheduler.stop()
        return [
            (text, outcome.error or "")
            if outcome.finish_reason is FinishReason.ERROR
            else (text, "")
            for text, outcome in answers
        ]

    return asyncio.run(main())


def pool_of(models: Models, max_loaded: int = 1) -> EnginePool:
    paths = {name: Path(name) for name in ("a", "b", "c", "broken")}
    return EnginePool("a", models.engine("a"), paths, models.load, max_loaded)


def test_each_job_runs_on_its_model_in_arrival_order() -> None:
    models = Models()
    pool = pool_of(models)
    answers = run_jobs(pool, [("1", "b"), ("2", None), ("3", "a"), ("4", "b"), ("5", "b")])
    assert [text for text, _ in answers] == ["b", "b", "a", "b", "b"]
    assert models.loads == ["b", "a", "b"]  # one slot: every change of model is a load
    assert list(models.open) == ["b"]  # and the one before is closed


def test_two_slots_keep_both_models_and_evict_the_least_recently_used() -> None:
    models = Models()
    pool = pool_of(models, max_loaded=2)
    run_jobs(pool, [("1", "b"), ("2", "a"), ("3", "b"), ("4", "a")])
    assert models.loads == ["b"]  # no thrashing
    run_jobs(pool, [("5", "c")])
    assert sorted(models.open) == ["a", "c"]  # b was used least recently
    assert pool.loaded_names == ["a", "c"]


def test_a_failed_load_fails_only_its_job_and_the_previous_model_serves() -> None:
    models = Models()
    pool = pool_of(models)
    answers = run_jobs(pool, [("1", "broken"), ("2", None), ("3", "a")])
    assert answers[0][1] == "broken: llama.cpp could not load this model file"
    assert [text for text, _ in answers[1:]] == ["a", "a"]
    assert pool.current_name == "a" and list(models.open) == ["a"]


# -- keep_alive, model-only jobs and the loading state ------------------------------------------


class WatchedModels(Models):
    """Models whose loads of 'slow' wait for a go-ahead."""

    def __init__(self) -> None:
        super().__init__()
        self.release_slow = threading.Event()
        self.slow_started = threading.Event()

    def load(self, path: Path) -> Engine:
        if path.name == "slow":
            self.slow_started.set()
            self.release_slow.wait()
        return super().load(path)


def watched_pool(models: WatchedModels) -> EnginePool:
    paths = {name: Path(name) for name in ("a", "b", "slow")}
    return EnginePool("a", models.engine("a"), paths, models.load, 1)


def asked(rid: str, model: str | None, **fields: object) -> GenerationRequest:
    return dataclasses.replace(request(rid, model), **fields)  # type: ignore[arg-type]


async def finish(scheduler: Scheduler, *requests: GenerationRequest) -> list[str]:
    jobs = [scheduler.submit(r) for r in requests]
    return [text for text, _ in await asyncio.gather(*(scheduler.collect(j) for j in jobs))]


def with_scheduler(pool: EnginePool, scenario: Callable[[Scheduler], Awaitable[None]]) -> None:
    """Run `scenario` against a started scheduler over `pool`, then stop it."""

    async def main() -> None:
        scheduler = Scheduler(pool, multiuser=20)
        scheduler.start()
        try:
            await scenario(scheduler)
        finally:
            scheduler.stop()

    asyncio.run(main())


def test_keep_alive_zero_unloads_after_the_reply_and_the_next_request_loads_it_again() -> None:
    models = WatchedModels()
    pool = watched_pool(models)

    async def scenario(scheduler: Scheduler) -> None:
        assert await finish(scheduler, asked("1", None, keep_alive=0.0)) == ["a"]
        assert await asyncio.to_thread(models.closed.wait, 30)
        assert pool.loaded_names == [] and scheduler.snapshot().model is None
        assert await finish(scheduler, asked("2", None)) == ["a"]  # the last model, again
        assert models.loads == ["a"] and pool.loaded_names == ["a"]

    with_scheduler(pool, scenario)


def test_keep_alive_zero_waits_for_the_queued_requests_of_the_same_model() -> None:
    models = WatchedModels()
    pool = watched_pool(models)

    async def scenario(scheduler: Scheduler) -> None:
        texts = await finish(
            scheduler, asked("1", "a", keep_alive=0.0), asked("2", "a"), asked("3", "a")
        )
        assert texts == ["a", "a", "a"]

    with_scheduler(pool, scenario)
    # the last request asked for nothing: the model stays (the server's default)
    assert models.loads == [] and pool.loaded_names == ["a"] and not models.closed.is_set()


def test_a_positive_keep_alive_unloads_once_idle_for_that_long() -> None:
    models = WatchedModels()
    pool = watched_pool(models)

    async def scenario(scheduler: Scheduler) -> None:
        await finish(scheduler, asked("1", "b", keep_alive=0.2))
        assert pool.loaded_names == ["b"]  # not at once
        assert await asyncio.to_thread(models.closed.wait, 30)  # "a" was evicted first
        models.closed.clear()
        assert await asyncio.to_thread(models.closed.wait, 30)
        assert pool.loaded_names == []

    with_scheduler(pool, scenario)


def test_model_only_jobs_load_and_unload_without_generating() -> None:
    models = WatchedModels()
    pool = watched_pool(models)

    async def scenario(scheduler: Scheduler) -> None:
        assert await finish(scheduler, asked("load", "b", model_only=True)) == [""]
        assert pool.loaded_names == ["b"] and models.loads == ["b"]
        assert scheduler.snapshot().perf.total_gens == 0  # not a generation
        unload_all = asked("unload", None, model_only=True, keep_alive=0.0)
        assert await finish(scheduler, unload_all) == [""]
        assert pool.loaded_names == [] and models.open == {}

    with_scheduler(pool, scenario)


def test_perf_shows_the_model_being_loaded_and_who_waits_for_it() -> None:
    models = WatchedModels()
    pool = watched_pool(models)

    async def scenario(scheduler: Scheduler) -> None:
        try:
            first = scheduler.submit(asked("1", "slow"))
            second = scheduler.submit(asked("2", "slow"))
            assert await asyncio.to_thread(models.slow_started.wait, 30)
            during = scheduler.snapshot()
            assert during.loading_model == "slow" and during.waiting == 1
            assert during.model is None and during.loaded_models == ()
            models.release_slow.set()
            await asyncio.gather(scheduler.collect(first), scheduler.collect(second))
            after = scheduler.snapshot()
            assert after.loading_model is None and after.model == "slow"
        finally:
            models.release_slow.set()  # never leave the worker blocked in the load

    with_scheduler(pool, scenario)


def test_odd_keep_alive_values_neither_spin_nor_stop_the_worker() -> None:
    """NaN and infinite mean never; a keep_alive of ages must not overflow the worker's wait."""
    models = WatchedModels()
    pool = watched_pool(models)

    async def scenario(scheduler: Scheduler) -> None:
        for number, keep in enumerate((math.nan, math.inf, 1e300, 10.0**12)):
            assert await finish(scheduler, asked(str(number), "b", keep_alive=keep)) == ["b"]
        assert pool.next_expiry() > 3600 and pool.loaded_names == ["b"]
        assert await finish(scheduler, asked("last", "a")) == ["a"]  # the worker still works

    with_scheduler(pool, scenario)


def test_a_file_gone_since_it_was_listed_fails_its_job_and_the_worker_goes_on() -> None:
    """The loader may raise anything (a deleted GGUF is an OSError): only that job fails."""
    models = Models()
    paths = {name: Path(name) for name in ("a", "gone")}

    def load(path: Path) -> Engine:
        if path.name == "gone":
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return models.load(path)

    pool = EnginePool("a", models.engine("a"), paths, load, 1)
    answers = run_jobs(pool, [("1", "gone"), ("2", "a")])
    assert "No such file or directory" in answers[0][1]
    assert answers[1] == ("a", "") and pool.loaded_names == ["a"]


def test_unloading_the_current_model_leaves_another_loaded_one_current() -> None:
    models = Models()
    pool = pool_of(models, max_loaded=2)
    run_jobs(pool, [("1", "b")])
    assert pool.loaded_names == ["a", "b"] and pool.current_name == "b"
    pool.unload("b")
    assert pool.current_name == "a"


# -- a pool of one: the scheduler around a single engine ------------------------------------------


def test_a_single_engine_is_a_pool_of_one_that_runs_every_job_and_never_unloads() -> None:
    """Scheduler(engine) wraps a bare engine in EnginePool.of_one: with no catalog to load
    from, a job naming another model runs on it, and keep_alive 0 leaves it loaded."""
    engine = ScriptedEngine(pieces=(b"x",), end_after=1)

    async def main() -> None:
        scheduler = Scheduler(engine, multiuser=20)
        scheduler.start()
        try:
            texts = await finish(
                scheduler, asked("1", "other"), asked("2", None, keep_alive=0.0), asked("3", None)
            )
            assert texts == ["x", "x", "x"]
            unload = asked("unload", None, model_only=True, keep_alive=0.0)
            _text, outcome = await scheduler.collect(scheduler.submit(unload))
            assert outcome.finish_reason is FinishReason.STOP  # answered, nothing closed
            snapshot = scheduler.snapshot()
            assert (snapshot.model, snapshot.loaded_models) == ("scripted", ("scripted",))
            assert snapshot.unloads_in == (math.inf,) and snapshot.loading_model is None
        finally:
            scheduler.stop()

    asyncio.run(main())
    assert [r.request_id for r in engine.requests] == ["1", "2", "3"]


def test_a_pool_of_one_counts_decodes_only_when_its_engine_does() -> None:
    assert EnginePool.of_one(ScriptedEngine()).decode_counts is None
    pool = EnginePool.of_one(ScriptedEngine())
    assert pool.unload() == [] and pool.loaded_names == ["scripted"]
    assert not pool.switch_needed("elsewhere") and not pool.needs_load("elsewhere")


# -- the prompt caches of the pool's engines (/api/extra/perf, /metrics) -------------------------


class CachingEngine(ClosingEngine, CachingScriptedEngine):
    """A loaded model with a prompt cache of its own."""


class CachingModels(Models):
    def engine(self, name: str) -> ScriptedEngine:
        engine = CachingEngine(self, name, pieces=(name.encode(),), end_after=1)
        self.open[name] = engine
        return engine


def cache_of(models: Models, name: str) -> PromptCache:
    engine = models.open[name]
    assert isinstance(engine, CachesPrompts)
    return engine.prompt_cache


def test_the_prompt_caches_add_up_and_an_unloaded_models_use_is_kept() -> None:
    models = CachingModels()
    pool = pool_of(models, max_loaded=2)
    run_jobs(pool, [("1", "b")])
    first, second = cache_of(models, "a"), cache_of(models, "b")
    saved = [SavedState((token,), None, 100) for token in (1, 2, 3)]
    for one in saved:
        first.put(one)
    first.used(saved[0], 7)
    second.put(SavedState((4,), None, 50))
    both = pool.prompt_cache_stats()
    assert both == PromptCacheStats(4, 1, 7, 0, 4, 350, first.max_bytes + second.max_bytes)
    run_jobs(pool, [("2", "c")])  # a, used least recently, is closed for c
    assert sorted(models.open) == ["b", "c"]
    # a's use stays counted; what it held went with it, and so did its bound.
    after = pool.prompt_cache_stats()
    assert after == PromptCacheStats(4, 1, 7, 0, 1, 50, 2 * second.max_bytes)


def test_a_pool_keeps_no_prompt_cache_figures_when_its_engines_keep_no_prompts() -> None:
    assert EnginePool.of_one(ScriptedEngine()).prompt_cache_stats() is None
    assert not isinstance(ScriptedEngine(), CachesPrompts)
    cache = PromptCache(1000)
    assert EnginePool.of_one(CachingScriptedEngine(prompt_cache=cache)).prompt_cache_stats() == (
        PromptCacheStats(max_bytes=1000)
    )


class ReadingPool(EnginePool):
    """A pool whose prompt caches read as given, one reading per call."""

    def __init__(self, readings: list[PromptCacheStats]) -> None:
        super().__init__("a", CachingScriptedEngine(), {}, Models().load)
        self._readings = readings

    def prompt_cache_stats(self) -> PromptCacheStats | None:
        return self._readings.pop(0)


def test_metrics_never_report_fewer_prompt_cache_uses_than_before() -> None:
    """Read while the worker closes an engine, the pool may count its use in neither total for
    a moment: /metrics keeps the counters where they were (a drop reads as a reset), while the
    held states and bytes are gauges and follow the reading."""
    higher = PromptCacheStats(5, 4, 30, 2, states=3, bytes=300, max_bytes=1000)
    lower = PromptCacheStats(1, 1, 10, 0, states=1, bytes=100, max_bytes=500)
    observer = Observer(RequestQueue(1, 10), ReadingPool([higher, lower]))
    assert observer.take_metrics().prompt_cache == higher
    assert observer.take_metrics().prompt_cache == PromptCacheStats(
        5, 4, 30, 2, states=1, bytes=100, max_bytes=500
    )
