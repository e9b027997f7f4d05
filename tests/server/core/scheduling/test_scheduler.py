"""The queue rules with a scripted engine: order, limits, cancellation, genkey privacy."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from server.core.scheduling.job import JobState
from server.core.scheduling.scheduler import QueueFullError, Scheduler, waiting_places
from server.core.types import FinishReason, GenerationRequest, SamplingParams
from tests.support.scripted_engine import ScriptedEngine


def request(name: str, tokens: int = 3, genkey: str = "") -> GenerationRequest:
    return GenerationRequest(request_id=name, prompt=name, max_tokens=tokens, genkey=genkey)


@pytest.mark.parametrize(("multiuser", "waiting"), [(0, 0), (1, 9), (2, 1), (5, 4), (10, 9)])
def test_waiting_places_follow_koboldcpp_table(multiuser: int, waiting: int) -> None:
    assert waiting_places(multiuser) == waiting


def test_waiters_are_served_in_arrival_order() -> None:
    engine = ScriptedEngine(token_seconds=0.005)

    async def main() -> list[str]:
        scheduler = Scheduler(engine, multiuser=10)
        scheduler.start()
        try:
            jobs = [scheduler.submit(request(f"r{i}")) for i in range(6)]
            await asyncio.gather(*(scheduler.collect(job) for job in jobs))
        finally:
            scheduler.stop()
        return [r.request_id for r in engine.requests]

    assert asyncio.run(main()) == [f"r{i}" for i in range(6)]


def test_full_queue_refuses_and_a_cancelled_waiter_frees_its_place_at_once() -> None:
    engine = ScriptedEngine(token_seconds=0.01)

    async def main() -> None:
        scheduler = Scheduler(engine, multiuser=2)
        scheduler.start()
        try:
            running = scheduler.submit(request("running", tokens=50))
            while running.state is not JobState.RUNNING:
                await asyncio.sleep(0.001)
            waiting = scheduler.submit(request("waiting"))
            with pytest.raises(QueueFullError):
                scheduler.submit(request("refused"))
            scheduler.cancel(waiting)
            assert scheduler.snapshot().waiting == 0
            _, outcome = await scheduler.collect(waiting)
            assert outcome.finish_reason is FinishReason.CANCELLED
            again = scheduler.submit(request("again"))  # the place is free again
            scheduler.cancel(running)
            await scheduler.collect(again)
        finally:
            scheduler.stop()
        assert [r.request_id for r in engine.requests] == ["running", "again"]

    asyncio.run(main())


def test_genkey_text_is_private_and_aborted_waiter_never_runs() -> None:
    engine = ScriptedEngine(pieces=[b"a"], token_seconds=0.01)

    async def main() -> None:
        scheduler = Scheduler(engine)
        scheduler.start()
        try:
            first = scheduler.submit(request("first", tokens=30, genkey="K1"))
            second = scheduler.submit(request("second", genkey="K2"))
            while not first.text:
                await asyncio.sleep(0.005)
            assert scheduler.text_for("K1").startswith("a")
            assert scheduler.text_for("K2") == ""
            assert scheduler.text_for("") == ""  # keyed text is never shown anonymously
            assert scheduler.abort("K2").success
            text, outcome = await scheduler.collect(second)
            assert (text, outcome.finish_reason) == ("", FinishReason.CANCELLED)
            await scheduler.collect(first)
        finally:
            scheduler.stop()
        assert [r.request_id for r in engine.requests] == ["first"]

    asyncio.run(main())


@pytest.mark.parametrize("default_seed", [-1, 42])
def test_requests_without_a_seed_use_the_servers_or_a_random_one(default_seed: int) -> None:
    """llama-server's --seed: a request that sets none samples from the server's seed (the
    same for every request); without one each gets its own random seed. A request's own seed
    always wins."""
    engine = ScriptedEngine()

    async def main() -> list[int]:
        scheduler = Scheduler(engine, default_seed=default_seed)
        scheduler.start()
        try:
            unseeded = [scheduler.submit(request(f"r{i}")) for i in range(3)]
            own = replace(request("own"), sampling=SamplingParams(seed=7))
            seeded = scheduler.submit(own)
            outcomes = [(await scheduler.collect(job))[1] for job in [*unseeded, seeded]]
        finally:
            scheduler.stop()
        return [outcome.seed for outcome in outcomes]

    *unseeded, own = asyncio.run(main())
    assert own == 7
    if default_seed >= 0:
        assert unseeded == [default_seed] * 3
    else:
        assert all(seed >= 0 for seed in unseeded) and len(set(unseeded)) == 3
