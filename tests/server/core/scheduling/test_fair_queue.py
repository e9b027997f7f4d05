"""The fair queue (server/core/scheduling/request_queue.py): waiting requests are served in turn
across owners (API keys, else addresses), each owner's own in arrival order; `--multiuser` bounds
the whole queue exactly as before, `--multiuserperkey` one owner's share of it. On RequestQueue
itself, then through the scheduler's worker with a scripted engine of several slots."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections import Counter
from collections.abc import Iterator

import pytest

from server.core.scheduling.job import Job, JobState
from server.core.scheduling.request_queue import (
    OwnerShare,
    OwnerShareFullError,
    QueueFullError,
    RequestQueue,
    owner_label,
    waiting_places,
)
from server.core.scheduling.scheduler import Scheduler
from server.core.types import FinishReason, GenerationOutcome, GenerationRequest
from tests.server.core.scheduling.test_worker import ScriptedBatchEngine


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """Jobs name the loop their events go to; these tests deliver none."""
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


def request(name: str, owner: str = "") -> GenerationRequest:
    return GenerationRequest(request_id=name, prompt=name, max_tokens=2, queue_owner=owner)


def admit(queue: RequestQueue, loop: asyncio.AbstractEventLoop, *names: str) -> list[Job]:
    """Admit a job per name; its owner is the name's letter ("A2" is owner A's)."""
    jobs = [Job(request=request(name, owner=name[0]), loop=loop) for name in names]
    for job in jobs:
        queue.admit(job)
    return jobs


def line(queue: RequestQueue) -> list[str]:
    return [job.request.request_id for job in queue.waiting]


def take(queue: RequestQueue) -> str:
    with queue.lock:
        return queue.take_next_locked().request.request_id


def finish(queue: RequestQueue, name: str) -> None:
    job = next(job for job in queue.running if job.request.request_id == name)
    queue.record_finished(job, GenerationOutcome(FinishReason.STOP), was_running=True)


def test_waiting_requests_take_turns_across_owners(loop: asyncio.AbstractEventLoop) -> None:
    queue = RequestQueue(slots=1, max_waiting=20)
    admit(queue, loop, "A1", "A2", "A3", "B1", "B2", "C1")
    # Each owner in order of its first request, one request per turn, until only A has some.
    assert line(queue) == ["A1", "B1", "C1", "A2", "B2", "A3"]
    assert [take(queue) for _ in range(6)] == ["A1", "B1", "C1", "A2", "B2", "A3"]


def test_one_owners_pile_does_not_hold_back_a_newcomer(loop: asyncio.AbstractEventLoop) -> None:
    """The issue's case: A runs one and queues six more, then B asks once. A has had its turn
    in this round (the running one), so B is served second, not seventh."""
    queue = RequestQueue(slots=1, max_waiting=20)
    admit(queue, loop, "A1")
    assert take(queue) == "A1"
    admit(queue, loop, *(f"A{i}" for i in range(2, 8)))
    admit(queue, loop, "B1")
    assert line(queue) == ["B1", "A2", "A3", "A4", "A5", "A6", "A7"]
    # A third owner arriving now also goes before A's second turn, after B (who came first).
    admit(queue, loop, "C1")
    assert line(queue)[:3] == ["B1", "C1", "A2"]


def test_one_owner_alone_is_served_first_come_first_served(
    loop: asyncio.AbstractEventLoop,
) -> None:
    queue = RequestQueue(slots=1, max_waiting=20)
    names = [f"A{i}" for i in range(8)]
    admit(queue, loop, *names[:3])
    assert take(queue) == "A0"
    admit(queue, loop, *names[3:])
    assert [take(queue) for _ in range(7)] == names[1:]


def test_random_traffic_keeps_each_owners_order_and_bounds_every_wait(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Random arrivals and turns among four owners: each owner's requests start in arrival
    order, and while a request waits as its owner's k-th in line, no other owner starts more
    than k + 1 (one turn per round; the round being served may already be under way)."""
    shuffle = random.Random(29)
    queue = RequestQueue(slots=1, max_waiting=1000)
    arrived: dict[str, list[str]] = {owner: [] for owner in "ABCD"}
    starts: Counter[str] = Counter()
    admitted_at: dict[str, tuple[int, Counter[str]]] = {}
    started: list[str] = []
    for step in range(800):
        if shuffle.random() < 0.5 or not queue.waiting:
            owner = shuffle.choice("ABCD")
            name = f"{owner}{step}"
            ahead = sum(1 for job in queue.waiting if job.request.queue_owner == owner)
            admit(queue, loop, name)
            admitted_at[name] = (ahead + 1, starts.copy())
            arrived[owner].append(name)
            continue
        name = take(queue)
        started.append(name)
        place, before = admitted_at[name]
        overtaken = starts - before
        del overtaken[name[0]]
        assert max(overtaken.values(), default=0) <= place + 1, (name, place, overtaken)
        starts[name[0]] += 1
    for owner, names in arrived.items():
        own_starts = [name for name in started if name[0] == owner]
        assert own_starts == names[: len(own_starts)]


def test_random_aborts_leave_the_rest_of_the_line_as_it_was(
    loop: asyncio.AbstractEventLoop,
) -> None:
    shuffle = random.Random(30)
    queue = RequestQueue(slots=1, max_waiting=1000)
    for step in range(300):
        roll = shuffle.random()
        if roll < 0.5 or not queue.waiting:
            admit(queue, loop, f"{shuffle.choice('ABC')}{step}")
        elif roll < 0.75:
            leaving = shuffle.choice(queue.waiting)
            expected = [name for name in line(queue) if name != leaving.request.request_id]
            assert queue.take_out(leaving)
            assert line(queue) == expected
        else:
            take(queue)


def test_multiuser_keeps_its_exact_count_whoever_asks(loop: asyncio.AbstractEventLoop) -> None:
    """--multiuser 5: five in flight (the running one counted), the sixth refused with the
    plain busy error (not an owner's share), however the five are spread over owners."""
    queue = RequestQueue(slots=1, max_waiting=waiting_places(5))
    admit(queue, loop, "A1")
    take(queue)
    admit(queue, loop, "A2", "B1", "C1", "D1")
    with pytest.raises(QueueFullError) as refused:
        admit(queue, loop, "E1")
    assert type(refused.value) is QueueFullError
    assert queue.counters.busy_responses == 1
    assert queue.take_out(queue.waiting[-1])  # a waiter leaves: exactly one place frees
    admit(queue, loop, "E1")
    with pytest.raises(QueueFullError):
        admit(queue, loop, "E2")


def test_an_owner_over_its_share_is_refused_while_others_get_in(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """--multiuserperkey 3: an owner's running request counts toward its share."""
    queue = RequestQueue(slots=1, max_waiting=9, owner_share=3)
    admit(queue, loop, "A1")
    take(queue)
    admit(queue, loop, "A2", "A3")
    with pytest.raises(OwnerShareFullError) as refused:
        admit(queue, loop, "A4")
    assert refused.value.share == 3
    assert queue.counters.busy_responses == 1
    admit(queue, loop, "B1", "B2", "B3")  # another owner has a share of its own
    with pytest.raises(OwnerShareFullError):
        admit(queue, loop, "B4")
    finish(queue, "A1")  # A's running request ends: A has a place again
    admit(queue, loop, "A4")
    assert line(queue) == ["B1", "A2", "B2", "A3", "B3", "A4"]


def test_the_whole_queue_full_is_the_busy_error_even_within_a_share(
    loop: asyncio.AbstractEventLoop,
) -> None:
    queue = RequestQueue(slots=1, max_waiting=2, owner_share=5)
    admit(queue, loop, "A1", "B1", "C1")
    with pytest.raises(QueueFullError) as refused:
        admit(queue, loop, "D1")
    assert type(refused.value) is QueueFullError


def test_aborting_a_waiter_keeps_everyone_elses_order(loop: asyncio.AbstractEventLoop) -> None:
    queue = RequestQueue(slots=1, max_waiting=20)
    jobs = {job.request.request_id: job for job in admit(queue, loop, "A1", "A2", "A3")}
    jobs.update({job.request.request_id: job for job in admit(queue, loop, "B1", "B2", "B3")})
    assert line(queue) == ["A1", "B1", "A2", "B2", "A3", "B3"]
    assert queue.take_out(jobs["A2"])
    assert line(queue) == ["A1", "B1", "B2", "A3", "B3"]
    # B's newest left: B's next request takes the place it had (after A3, as B3 was).
    assert queue.take_out(jobs["B3"])
    admit(queue, loop, "B4")
    assert line(queue) == ["A1", "B1", "B2", "A3", "B4"]
    assert not queue.take_out(jobs["B3"])  # already out


def test_the_line_shows_labels_never_owners(loop: asyncio.AbstractEventLoop) -> None:
    queue = RequestQueue(slots=1, max_waiting=20)
    secret_owner = "key-digest-0123456789abcdef"
    jobs = [Job(request=request(f"S{i}", owner=secret_owner), loop=loop) for i in range(3)]
    for job in jobs:
        queue.admit(job)
    take(queue)
    admit(queue, loop, "B1")
    with queue.lock:
        reading = queue.line_locked()
    secret, other = owner_label(secret_owner), owner_label("B")
    assert reading.line == (other, secret, secret)
    assert reading.owners == (OwnerShare(other, 1, 0), OwnerShare(secret, 2, 1))
    assert len(secret) == 8 and secret != other
    assert secret_owner not in secret and owner_label(secret_owner) == secret  # stable
    assert owner_label("") == "-"


def test_a_job_about_to_start_counts_as_running_in_the_line(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Perf counts a job the worker has not picked up yet, with a slot free, as running;
    the line's reading agrees, so `queue` and the line's length match."""
    queue = RequestQueue(slots=1, max_waiting=20)
    admit(queue, loop, "A1", "A2")
    with queue.lock:
        reading = queue.line_locked()
        assert queue.running_and_waiting_locked() == (1, 1)
    assert reading.line == (owner_label("A"),)
    assert reading.owners == (OwnerShare(owner_label("A"), 1, 1),)


def owned(name: str, tokens: int = 2) -> GenerationRequest:
    return dataclasses.replace(request(name, owner=name[0]), max_tokens=tokens)


def run_batched(engine: ScriptedBatchEngine, *requests: GenerationRequest) -> None:
    """Submit every request before the worker starts (so the line is known), run them all."""

    async def main() -> None:
        scheduler = Scheduler(engine, multiuser=10)
        try:
            jobs = [scheduler.submit(request) for request in requests]
            assert all(job.state is JobState.QUEUED for job in jobs)
            scheduler.start()
            await asyncio.gather(*(scheduler.collect(job) for job in jobs))
        finally:
            scheduler.stop()

    asyncio.run(main())


def test_batching_fills_free_slots_in_the_fair_order() -> None:
    engine = ScriptedBatchEngine(slots=2)
    run_batched(engine, owned("A1"), owned("A2"), owned("A3"), owned("B1"), owned("B2"))
    assert [r.request_id for r in engine.requests] == ["A1", "B1", "A2", "B2", "A3"]
    assert engine.steps[0] == ("A1", "B1")


def test_a_request_that_runs_alone_does_so_at_its_fair_turn() -> None:
    """B's embedding request is second in the fair order: it waits for A1 to finish,
    runs alone, and A's second request (which arrived before it) follows it."""
    engine = ScriptedBatchEngine(slots=2)
    embedding = dataclasses.replace(owned("B1"), embed_inputs=("some text",))
    run_batched(engine, owned("A1", tokens=3), owned("A2"), embedding)
    assert [r.request_id for r in engine.requests] == ["A1", "B1", "A2"]
    assert all(len(names) == 1 for names in engine.steps)
