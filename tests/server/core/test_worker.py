"""The batching worker (server/core/scheduling/worker.py) with a scripted engine of several slots:
requests join free slots between steps, one that must run alone waits for the batch to drain
(and later arrivals wait behind it), and a model-only job never generates."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Iterator

from server.core.scheduling.scheduler import Scheduler
from server.core.types import (
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    TokenEvent,
)
from tests.support.scripted_engine import ScriptedEngine


class ScriptedBatchEngine(ScriptedEngine):
    """A ScriptedEngine with `slots` slots: each step advances every started sequence by one
    token, and records which requests it advanced (`steps`)."""

    def __init__(self, slots: int = 2) -> None:
        super().__init__(pieces=(b"t",))
        self._slots = slots
        self._active: dict[object, tuple[str, Iterator[EngineReport]]] = {}
        self.steps: list[tuple[str, ...]] = []

    @property
    def parallel_slots(self) -> int:
        return self._slots

    def start_sequence(self, request: GenerationRequest, cancelled: threading.Event) -> object:
        assert len(self._active) < self._slots, "more sequences than slots"
        handle = object()
        self._active[handle] = (request.request_id, self.generate(request, cancelled))
        return handle

    def step(self) -> list[tuple[object, EngineReport]]:
        self.steps.append(tuple(sorted(name for name, _ in self._active.values())))
        events: list[tuple[object, EngineReport]] = []
        for handle, (_name, reports) in list(self._active.items()):
            for report in reports:  # up to this sequence's next token, or its end
                events.append((handle, report))
                if isinstance(report, GenerationOutcome):
                    del self._active[handle]
                if isinstance(report, TokenEvent | GenerationOutcome):
                    break
        return events


def plain(name: str, tokens: int) -> GenerationRequest:
    return GenerationRequest(request_id=name, prompt=name, max_tokens=tokens)


def run_all(engine: ScriptedBatchEngine, *requests: GenerationRequest) -> list[GenerationOutcome]:
    """Submit every request before the worker starts (so the line is known), run them all."""

    async def main() -> list[GenerationOutcome]:
        scheduler = Scheduler(engine, multiuser=10)
        try:
            jobs = [scheduler.submit(request) for request in requests]
            scheduler.start()
            answers = await asyncio.gather(*(scheduler.collect(job) for job in jobs))
        finally:
            scheduler.stop()
        return [outcome for _text, outcome in answers]

    return asyncio.run(main())


def test_a_request_joins_a_slot_freed_while_another_still_runs() -> None:
    engine = ScriptedBatchEngine(slots=2)
    outcomes = run_all(engine, plain("r0", 2), plain("r1", 5), plain("r2", 2))
    assert [o.completion_tokens for o in outcomes] == [2, 5, 2]
    assert engine.steps[0] == ("r0", "r1")
    assert ("r1", "r2") in engine.steps  # r2 started before r1 ended: continuous batching
    assert all(len(names) <= 2 for names in engine.steps)


def test_an_unbatchable_request_runs_alone_and_later_arrivals_wait_behind_it() -> None:
    engine = ScriptedBatchEngine(slots=2)
    schema = {"type": "object"}
    constrained = dataclasses.replace(plain("g1", 2), json_schema=schema)
    run_all(engine, plain("r0", 3), constrained, plain("r2", 2))
    assert [r.request_id for r in engine.requests] == ["r0", "g1", "r2"]
    # r2 could have joined r0's free slot, but arrival order keeps it behind g1
    assert all(len(names) == 1 for names in engine.steps)
    assert engine.steps == [("r0",)] * 4 + [("r2",)] * 3


def test_a_model_only_job_answers_without_generating_in_a_batch() -> None:
    engine = ScriptedBatchEngine(slots=2)
    load = dataclasses.replace(plain("load", 1), model_only=True)
    outcomes = run_all(engine, plain("r0", 2), load, plain("r1", 2))
    assert outcomes[1].finish_reason is FinishReason.STOP
    assert [r.request_id for r in engine.requests] == ["r0", "r1"]
