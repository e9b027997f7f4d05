"""Which of the engine's progress reports reach a job's consumer (server/core/scheduling/job.py
`Job.report_progress`, llama-server's `return_progress`): only when asked, only while the
prompt is read, each one further than the last; and through the scheduler from a scripted
engine that reads its prompt in chunks."""

from __future__ import annotations

import asyncio
import dataclasses

from server.core.scheduling.job import Job
from server.core.scheduling.scheduler import Scheduler
from server.core.types import EngineReport, GenerationRequest, Progress, TokenEvent
from tests.support.scripted_engine import ScriptedEngine

ASKING = GenerationRequest("r", "0123456789", max_tokens=2, report_progress=True)


def delivered(request: GenerationRequest, reports: list[Progress]) -> list[EngineReport]:
    loop = asyncio.new_event_loop()
    try:
        job = Job(request, loop)
        for report in reports:
            job.report_progress(report)
        return list(job.inbox)
    finally:
        loop.close()


def test_only_the_prompt_reading_reaches_a_consumer_that_asked() -> None:
    reports = [
        Progress(4, 10, 0, cached=4),  # what came from the cache, before any decode
        Progress(8, 10, 0, cached=4),
        Progress(8, 10, 0, cached=4),  # no further (another sequence's decode): not again
        Progress(10, 10, 1, cached=4),  # the prompt's last decode (it sampled too)
        Progress(10, 10, 2, cached=4),  # generating: the live view's, not the client's
    ]
    assert delivered(ASKING, reports) == reports[:2] + reports[3:4]
    not_asking = dataclasses.replace(ASKING, report_progress=False)
    assert delivered(not_asking, reports) == []


def test_a_prompt_read_in_one_decode_is_reported_twice() -> None:
    reports = [Progress(0, 6, 0), Progress(6, 6, 1), Progress(6, 6, 2)]
    assert delivered(ASKING, reports) == reports[:2]


def test_the_scheduler_hands_reports_before_the_text() -> None:
    async def main() -> list[EngineReport]:
        scheduler = Scheduler(ScriptedEngine(pieces=[b"ok"], prompt_chunk=4), multiuser=10)
        scheduler.start()
        try:
            job = scheduler.submit(ASKING)
            return [event async for event in scheduler.events(job) if event is not None]
        finally:
            scheduler.stop()

    events = asyncio.run(main())
    reports = [event for event in events if isinstance(event, Progress)]
    assert [report.prompt_done for report in reports] == [0, 4, 8, 10]
    first_text = next(i for i, event in enumerate(events) if isinstance(event, TokenEvent))
    assert all(isinstance(event, Progress) for event in events[:first_text])
