"""EnginePool in the scheduler (issue 12's model switching, in progress): jobs run on the model
they name, in arrival order across models, least recently used evicted, and a model that fails
to load fails only the job that asked for it."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from server.core.engine import Engine, EngineError
from server.core.engine_pool import EnginePool
from server.core.scheduler import Scheduler
from server.core.types import FinishReason, GenerationRequest
from tests.scripted_engine import ScriptedEngine


class Models:
    """A loader of scripted engines that answer with their model's name; it records loads and
    closes, and fails for a path named 'broken'."""

    def __init__(self) -> None:
        self.loads: list[str] = []
        self.open: dict[str, ScriptedEngine] = {}

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
