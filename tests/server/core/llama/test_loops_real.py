"""The real engine with a grammar-bound reply: the hidden tool decision's answer comes first,
and a bound reply that loops ends at the loop bound (server/core/text/loops.py) when asked."""

from __future__ import annotations

import threading

import pytest

from server.core.llama.engine import LlamaCppEngine
from server.core.scheduling.engine import ContextOverflow
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


def run(instruct_engine: LlamaCppEngine, request: GenerationRequest) -> list[object]:
    return list(instruct_engine.generate(request, threading.Event()))


def test_a_bound_reply_that_loops_ends_at_the_bound(instruct_engine: LlamaCppEngine) -> None:
    """The grammar forbids an end before 60 sevens; the bound ends the loop long before."""
    request = GenerationRequest("loop", "Numbers:", 200, GREEDY, json_schema=SEVENS, cut_loops=True)
    events = run(instruct_engine, request)
    outcome = events[-1]
    assert isinstance(outcome, GenerationOutcome)
    assert outcome.looped and outcome.finish_reason is FinishReason.LENGTH
    text = "".join(event.text for event in events if isinstance(event, TokenEvent))
    assert 8 <= text.count("7") < 60
    assert outcome.completion_tokens < request.max_tokens


def test_the_tool_decision_comes_before_the_reply(instruct_engine: LlamaCppEngine) -> None:
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
    events = run(instruct_engine, request)
    decisions = [i for i, event in enumerate(events) if isinstance(event, ToolDecision)]
    texts = [i for i, event in enumerate(events) if isinstance(event, TokenEvent)]
    assert len(decisions) == 1 and (not texts or decisions[0] < texts[0])
    decision, outcome = events[decisions[0]], events[-1]
    assert isinstance(decision, ToolDecision) and isinstance(outcome, GenerationOutcome)
    assert outcome.constrained == decision.call


def test_a_reply_over_the_context_is_refused_before_the_decision_is_asked(
    instruct_engine: LlamaCppEngine,
) -> None:
    """A request that refuses overflow (the OpenAI dialect) and whose reply cannot fit is
    refused as it starts, as one without a decision is (the dialects answer 400 with both
    sizes), whatever the hidden question would have made of a trimmed copy of it."""
    long = "apple " * 1500
    request = GenerationRequest(
        "too-long",
        f"<|im_start|>user\n{long}<|im_end|>\n<|im_start|>assistant\n",
        8,
        GREEDY,
        json_schema={"type": "object"},
        schema_decision_prompt=f"<|im_start|>user\n{long}Need a tool?<|im_end|>\n",
        refuse_overflow=True,
    )
    with pytest.raises(ContextOverflow) as refused:
        run(instruct_engine, request)
    assert refused.value.context == 1024 and refused.value.prompt_tokens > 1024
