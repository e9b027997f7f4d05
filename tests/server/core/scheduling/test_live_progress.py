"""A job's live progress (server/core/scheduling/job.py LiveProgress), as the engine reports it."""

from __future__ import annotations

from server.core.scheduling.job import LiveProgress
from server.core.types import Progress


def test_prompt_progress_then_speed_from_the_tokens_after_the_prompt() -> None:
    live = LiveProgress()
    live = live.advanced(Progress(512, 1500, 0), now=10.0)
    live = live.advanced(Progress(1024, 1500, 0), now=10.5)
    assert not live.generating and live.tokens_per_second() == 0.0
    # The decode that ends the prompt also samples the first token.
    live = live.advanced(Progress(1500, 1500, 1), now=11.0)
    assert live.generating and live.tokens_per_second() == 0.0  # one point is no speed
    live = live.advanced(Progress(1500, 1500, 11), now=11.5)
    assert live.tokens_per_second() == 20.0  # 10 tokens in half a second
    # A report without a new token does not move the speed's end point.
    assert live.advanced(Progress(1500, 1500, 11), now=13.0).tokens_per_second() == 20.0
