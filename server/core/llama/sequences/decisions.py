"""The hidden tool decision as a sequence of its own, batched like any other.

A request with `schema_decision_prompt` (tool_choice "auto" without a tool-call format of the
model's own) first asks the model, hidden, whether it needs a tool: one greedy token, yes or
no, bound by a grammar. The question is a sequence of its own, stepped like any other (once it
was a loop of its own inside `generate`): when it ends, its answer goes out under the
request's handle as a ToolDecision and the reply starts in the same step, bound to the schema
or free, its events under the same handle. The question's own tokens are never the reply's.
This is what lets grammar-bound requests batch (request_queue.unbatchable_reason): while the
question ran inside `generate`, a request with a decision had to have the engine to itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from server.core.scheduling.engine import failure_outcome
from server.core.types import (
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
    ToolDecision,
)

logger = logging.getLogger(__name__)
Events = list[tuple[object, EngineReport]]
# Starts a request's reply: (request, cancelled, the schema it is bound to or None) → handle.
StartReply = Callable[[GenerationRequest, threading.Event, dict[str, Any] | None], object]


def question_for(request: GenerationRequest) -> GenerationRequest:
    """The hidden question of a request with a decision to make: its prompt, one greedy token
    (the engine binds it to yes or no), on the request's adapters and cache."""
    assert request.schema_decision_prompt is not None
    return GenerationRequest(
        "decision",
        request.schema_decision_prompt,
        1,
        SamplingParams(temperature=0.0),
        lora=request.lora,
        cache_owner=request.cache_owner,
    )


@dataclass
class _Question:
    """A decision being asked: the request it decides for, and its answer so far."""

    request: GenerationRequest
    cancelled: threading.Event
    answer: str = ""


class Decisions:
    """The questions in flight, and the replies whose events go under their question's handle."""

    def __init__(self) -> None:
        self._questions: dict[object, _Question] = {}
        self._handles: dict[object, object] = {}  # a reply's sequence → its request's handle

    def asking(
        self, question: object, request: GenerationRequest, cancelled: threading.Event
    ) -> None:
        """`question` (a sequence) asks whether `request` needs a tool; it is its handle."""
        self._questions[question] = _Question(request, cancelled)

    def relabel(self, events: Events, start_reply: StartReply) -> Events:
        """One step's events as the requests see them: a question's tokens kept back, its end
        turned into the decision (and the reply started), a reply's under its handle."""
        if not self._questions and not self._handles:
            return events  # no decision in flight: every step but a few
        seen: Events = []
        for owner, event in events:
            question = self._questions.get(owner)
            if question is None:
                seen.append((self._handles.get(owner, owner), event))
                if isinstance(event, GenerationOutcome):
                    self._handles.pop(owner, None)
            elif isinstance(event, TokenEvent):
                question.answer += event.text
            elif isinstance(event, GenerationOutcome):
                del self._questions[owner]
                seen += self._decided(owner, question, event, start_reply)
        return seen

    def _decided(
        self, handle: object, question: _Question, end: GenerationOutcome, start_reply: StartReply
    ) -> Events:
        if end.finish_reason in (FinishReason.CANCELLED, FinishReason.ERROR):
            return [(handle, end)]  # the request ends with its question
        answer = question.answer.strip()
        logger.info("Tool decision: %s", answer or "(nothing)")
        call = answer.lower().startswith("y")
        schema = question.request.json_schema if call else None
        try:
            reply = start_reply(question.request, question.cancelled, schema)
        except Exception as exc:  # the reply could not start: the request fails, not the batch
            logger.exception("[%s] could not start the reply", question.request.request_id)
            return [(handle, ToolDecision(call)), (handle, failure_outcome(exc))]
        self._handles[reply] = handle
        return [(handle, ToolDecision(call))]
