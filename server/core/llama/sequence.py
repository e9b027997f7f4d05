"""A request being generated: its slot, prompt, sampler and progress, and its outcome."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from server.core.llama.slots import Slot
from server.core.llama.thinking import ThoughtBudget
from server.core.text_stream import TokenTextPipeline
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    TokenEvent,
    TokenLogprob,
)


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
    truncated: bool = False  # the prompt's front was cut to fit
    generated: int = 0
    next_token: int | None = None  # sampled, decoded in the next step
    logits_row: int = -1  # the batch row whose logits this sequence samples from
    prompt_done: float | None = None
    first_text_at: float | None = None
    # Generated tokens (and their log-probabilities, when asked) whose text is not sent yet.
    held_tokens: list[int] = field(default_factory=list)
    held_logprobs: list[TokenLogprob] = field(default_factory=list)
    # The request's thinking budget: it may write the thought's end tag in place of sampling.
    thought: ThoughtBudget | None = None

    def release(self, text: str) -> TokenEvent:
        """The event that sends `text`, carrying the tokens generated since the last one."""
        event = TokenEvent(text, tuple(self.held_tokens), tuple(self.held_logprobs))
        self.held_tokens.clear()
        self.held_logprobs.clear()
        return event

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
            prompt_truncated=self.truncated,
        )
