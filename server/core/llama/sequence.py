"""A request being generated: its slot, prompt, sampler and progress, and its outcome."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from server.core.llama.slots import Slot
from server.core.text_stream import TokenTextPipeline
from server.core.types import FinishReason, GenerationOutcome, GenerationRequest


@dataclass(eq=False)
class Sequence:
    """A request being generated in a slot."""

    request: GenerationRequest
    cancelled: threading.Event
    slot: Slot
    prompt: list[int]
    max_tokens: int
    reused: int
    decoded: int  # prompt tokens in the slot's cache so far
    sampler: Any
    pipeline: TokenTextPipeline
    started: float
    constrained: bool
    generated: int = 0
    next_token: int | None = None  # sampled, decoded in the next step
    logits_row: int = -1  # the batch row whose logits this sequence samples from
    prompt_done: float | None = None
    first_text_at: float | None = None

    def outcome(
        self, reason: FinishReason, stop_sequence: str | None, error: str | None
    ) -> GenerationOutcome:
        finished = time.perf_counter()
        prompt_done = self.prompt_done or finished
        first = self.first_text_at
        return GenerationOutcome(
            reason,
            prompt_tokens=len(self.prompt),
            completion_tokens=self.generated,
            prompt_seconds=prompt_done - self.started,
            generation_seconds=finished - prompt_done,
            time_to_first_token=None if first is None else first - self.started,
            seed=self.request.sampling.seed,
            stop_sequence=stop_sequence,
            error=error,
            reused_prompt_tokens=self.reused,
            constrained=self.constrained,
        )
