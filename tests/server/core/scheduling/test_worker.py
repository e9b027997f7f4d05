"""The batching worker (server/core/scheduling/worker.py) with a scripted engine of several slots:
requests join free slots between steps (grammar-bound ones too), one that must run alone waits for
the batch to drain (and later arrivals wait behind it), the jobs of one abort leave before anyone
joins, and a model-only job never generates."""

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
    embedding = dataclasses.replace(plain("e1", 2), embed_inputs=("some text",))
    run_all(engine, plain("r0", 3), embedding, plain("r2", 2))
    assert [r.request_id for r in engine.requests] == ["r0", "e1", "r2"]
    # r2 could have joined r0's free slot, but arrival order keeps it behind e1
    assert all(len(names) == 1 for names in engine.steps)
    assert engine.steps == [("r0",)] * 4 + [("r2",)] * 3


def test_grammar_and_schema_bound_requests_batch_like_any_other() -> None:
    """KoboldCpp runs them alone; here each sequence samples through its own chain."""
    engine = ScriptedBatchEngine(slots=3)
    schema = dataclasses.replace(plain("s1", 3), json_schema={"type": "object"})
    grammar = dataclasses.replace(plain("g1", 3), grammar='root ::= "a"')
    run_all(engine, plain("r0", 3), schema, grammar)
    assert engine.steps[0] == ("g1", "r0", "s1")


def test_a_model_only_job_answers_without_generating_in_a_batch() -> None:
    engine = ScriptedBatchEngine(slots=2)
    load = dataclasses.replace(plain("load", 1), model_only=True)
    outcomes = run_all(engine, plain("r0", 2), load, plain("r1", 2))
    assert outcomes[1].finish_reason is FinishReason.STOP
    assert [r.request_id for r in engine.requests] == ["r0", "r1"]


class PausingBatchEngine(ScriptedBatchEngine):
    """Once `pause` is set, its next step stops after advancing the first sequence, says so
    (`paused`) and goes on only at `resume`: an abort can land in the middle of a step."""

    def __init__(self, slots: int) -> None:
        super().__init__(slots)
        self.pause, self.paused, self.resume = (threading.Event() for _ in range(3))

    def step(self) -> list[tuple[object, EngineReport]]:
        if not self.pause.is_set():
            return super().step()
        self.pause.clear()
        self.steps.append(tuple(sorted(name for name, _ in self._active.values())))
        events: list[tuple[object, EngineReport]] = []
        for index, (handle, (_name, reports)) in enumerate(list(self._active.items())):
            if index == 1:
                self.paused.set()
                self.resume.wait()
            for report in reports:
                events.append((handle, report))
                if isinstance(report, GenerationOutcome):
                    del self._active[handle]
                if isinstance(report, TokenEvent | GenerationOutcome):
                    break
        return events


def test_the_jobs_of_one_abort_leave_before_anyone_waiting_joins() -> None:
    """Two running jobs aborted at once, in the middle of a step that has already advanced
    the first: the second leaves in that step, the first only in the next. The ones waiting
    do not start in the second's slot beside the first; they start together once both left."""
    engine = PausingBatchEngine(slots=2)

    async def main() -> None:
        scheduler = Scheduler(engine, multiuser=10)
        try:
            holds = [scheduler.submit(plain(name, 10_000)) for name in ("h0", "h1")]
            scheduler.start()
            await scheduler.events(holds[0]).__anext__()  # both hold a slot, generating
            waiting = [scheduler.submit(plain(name, 2)) for name in ("w0", "w1")]
            engine.pause.set()
            assert await asyncio.to_thread(engine.paused.wait, 60)
            assert scheduler.abort().done  # nobody's genkey: every running job, as one
            engine.resume.set()
            await asyncio.gather(*(scheduler.collect(job) for job in holds + waiting))
        finally:
            scheduler.stop()

    asyncio.run(main())
    joined = [names for names in engine.steps if "w0" in names or "w1" in names]
    assert joined[0] == ("w0", "w1")
