"""The real engine with a grammar-bound reply: the hidden tool decision's answer comes first,
and a bound reply that loops ends at the loop bound (server/core/text/loops.py) when asked."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.core.llama.engine import LlamaCppEngine
from server.core.load_settings import LoadSettings
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
    ToolDecision,
)

# The grammar makes the reply a loop: at least 60 sevens, ", 7" again and again.
SEVENS = {"type": "array", "items": {"const": 7}, "minItems": 60}
GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture(scope="module")
def engine(smollm2: Path) -> Iterator[LlamaCppEngine]:
    engine = LlamaCppEngine.load(smollm2, LoadSettings(contextsize=1024))
    yield engine
    engine.close()


def run(engine: LlamaCppEngine, request: GenerationRequest) -> list[object]:
    return list(engine.generate(request, threading.Event()))


def test_a_bound_reply_that_loops_ends_at_the_bound(engine: LlamaCppEngine) -> None:
    """The grammar forbids an end before 60 sevens; the bound ends the loop long before."""
    request = GenerationRequest("loop", "Numbers:", 200, GREEDY, json_schema=SEVENS, cut_loops=True)
    events = run(engine, request)
    outcome = events[-1]
    assert isinstance(outcome, GenerationOutcome)
    assert outcome.looped and outcome.finish_reason is FinishReason.LENGTH
    text = "".join(event.text for event in events if isinstance(event, TokenEvent))
    assert 8 <= text.count("7") < 60
    assert outcome.completion_tokens < request.max_tokens


def test_the_tool_decision_comes_before_the_reply(engine: LlamaCppEngine) -> None:
    request = GenerationRequest(
        "decide",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
        8,
        GREEDY,
        json_schema={"type": "object"},
        schema_decision_prompt=(
            "<|im_start|>user\nNeed a tool? yes or no<|im_end|>\n<|im_start|>assistant\n"
        ),
    )
    events = run(engine, request)
    decisions = [i for i, event in enumerate(events) if isinstance(event, ToolDecision)]
    texts = [i for i, event in enumerate(events) if isinstance(event, TokenEvent)]
    assert len(decisions) == 1 and (not texts or decisions[0] < texts[0])
    decision, outcome = events[decisions[0]], events[-1]
    assert isinstance(decision, ToolDecision) and isinstance(outcome, GenerationOutcome)
    assert outcome.constrained == decision.call
