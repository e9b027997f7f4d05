"""A request being generated: its slot, prompt, sampler and progress, and its outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import llama_cpp as llama

from server.core.llama.loading.media import MediaPrompt
from server.core.llama.sequences.slots import Slot
from server.core.llama.sequences.thinking import ThoughtBudget
from server.core.llama.speculation.speculation import Speculator
from server.core.text.loops import LoopWatch
from server.core.text.text_stream import TokenTextPipeline
from server.core.types import (
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    Progress,
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
    # The sampler chain is greedy alone (sampler.plain_greedy): rows are read with numpy.
    greedy: bool = False
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
    # Speculative decoding (server/core/llama/speculation/speculation.py): what drafts this
    # sequence's tokens, and the draft decoded after `next_token` in this step.
    speculator: Speculator | None = None
    draft: list[int] = field(default_factory=list)
    # The prompt's images and sounds (server/core/llama/loading/media.py): where each stands among
    # `prompt`'s tokens; decoded apart, before the step that reaches them.
    media: MediaPrompt | None = None
    # GenerationRequest.cut_loops: the reply's end, watched for a loop (server/core/text/loops.py).
    loops: LoopWatch | None = None
    looped: bool = False

    def plan_draft(self, room: int, slot_context: int) -> int:
        """Draft what may follow `next_token`, in at most `room` rows; returns its length.
        A draft never goes past max_tokens (the last row's sample is the reply's last token)
        nor fills the slot's context (so that a full context is seen after a decode as
        without speculation)."""
        self.draft = []
        if self.next_token is None or self.speculator is None:
            return 0
        room = min(
            room,
            self.max_tokens - self.generated - 1,
            slot_context - len(self.slot.cached) - 2,
        )
        self.draft = self.speculator.draft(self.slot.cached, self.next_token, room)
        return len(self.draft)

    def sample_rows(self, take: Callable[[int], int | None]) -> int:
        """Sample this decode's rows: the next token's, then, while each token sampled
        equals the draft token decoded after it, that one's. `take(row)` samples a row and
        takes its token into the reply (None: the reply has ended). The first token that
        differs from the draft (or the one after the whole draft) is the next token.
        Returns how many draft tokens were rejected.

        What is sampled stays exactly as without speculation: each row holds the model's
        logits for the very tokens the reply has up to it (a draft token counts only when
        it is what was sampled there), and each token goes once, in order, through the
        request's sampler chain (grammar, penalties, one seeded draw per token either way)
        and the same per-token path. A fixed draft only decides how many rows one decode
        holds, never what is sampled: greedy output is unchanged, and sampled output keeps
        its distribution (the usual acceptance rule with a draft that is certain: accept
        when the sampled token is the draft's)."""
        row, draft, spec = self.logits_row, self.draft, self.speculator
        self.logits_row, self.draft, self.next_token = -1, [], None
        if spec is not None:  # counted now: the reply may end in the loop below
            spec.checking(len(draft))
        accepted = 0
        while (token := take(row + accepted)) is not None:
            if accepted < len(draft) and token == draft[accepted]:
                accepted += 1  # already decoded: its row says what follows it
                if spec is not None:
                    spec.accepted += 1
                continue
            self.next_token = token
            break
        if spec is not None:
            spec.checked(len(draft), accepted)
        return len(draft) - accepted

    def progress(self, done: int) -> Progress:
        """How far the sequence has got, `done` prompt tokens being in the context."""
        seconds = time.perf_counter() - self.started
        return Progress(done, len(self.prompt), self.generated, self.reused, seconds)

    def drop_rejected(self, memory: Any, rejected: int) -> bool:
        """Drop the slot's last `rejected` tokens (draft tokens the model did not confirm)
        from its KV cache and `cached`; False when llama.cpp could not."""
        keep = len(self.slot.cached) - rejected
        if rejected <= 0:
            return True
        if not llama.llama_memory_seq_rm(memory, self.slot.seq_id, keep, -1):
            return False
        del self.slot.cached[keep:]
        return True

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
        first, spec = self.first_text_at, self.speculator
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
            looped=self.looped,
            prompt_truncated=self.truncated,
            draft_tokens=spec.drafted if spec else 0,
            draft_accepted=spec.accepted if spec else 0,
            draft_steps=spec.steps if spec else 0,
        )


def joined_text(reports: list[tuple[object, EngineReport]]) -> list[tuple[object, EngineReport]]:
    """One sequence's reports from one decode with their TokenEvents joined into one, where
    the first was (the rest, its outcome, after it): the tokens of an accepted draft arrive
    together anyway, and one event spares every dialect's stream a frame per token."""
    texts = [(owner, event) for owner, event in reports if isinstance(event, TokenEvent)]
    if len(texts) < 2:
        return reports
    owner = texts[0][0]
    events = [event for _, event in texts if isinstance(event, TokenEvent)]
    text = TokenEvent(
        "".join(event.text for event in events),
        tuple(token for event in events for token in event.token_ids),
        tuple(logprob for event in events for logprob in event.logprobs),
    )
    return [(owner, text), *((o, e) for o, e in reports if not isinstance(e, TokenEvent))]
