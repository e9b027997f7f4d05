"""The thinking budget on the real engine (SmolLM2-135M-Instruct): once a thought has taken its
tokens, the engine writes `</think>` itself, as tokens the model then reads, and the model
answers. A grammar keeps the small model thinking in letters (and lets the tag come anywhere
in the thought), so only the budget can end the thought where it ends.

Greedy sampling, and each budgeted request compared with the same request without a budget in
the same engine: their tokens agree until the budget is spent, then part. The last test does
the same over HTTP with the official client, the budget coming from `reasoning_effort`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import openai
import pytest

from server.core.llama import LlamaCppEngine
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
    TokenLogprob,
)
from tests.support.servers import RunningServer

pytestmark = pytest.mark.model

QUESTION = "<|im_start|>user\nWhat is two and two?<|im_end|>\n<|im_start|>assistant\n"
# Thought in letters, the tag, then an answer.
AFTER_THOUGHT = '"</think>" "\\n"? "answer" [a-z ]*'


def generate(
    instruct_engine: LlamaCppEngine,
    prompt: str,
    grammar: str,
    budget: int | None,
    *,
    opened: bool,
    logprobs: int | None = None,
) -> tuple[list[int], list[TokenLogprob], str]:
    request = GenerationRequest(
        "budget",
        prompt,
        max_tokens=30,
        sampling=SamplingParams(temperature=0.0),
        grammar=grammar,
        thinking_open=opened,
        reasoning_budget=budget,
        logprobs=logprobs,
    )
    tokens: list[int] = []
    probabilities: list[TokenLogprob] = []
    text = ""
    for event in instruct_engine.generate(request, threading.Event()):
        if isinstance(event, TokenEvent):
            tokens += event.token_ids
            probabilities += event.logprobs
            text += event.text
        elif isinstance(event, GenerationOutcome):
            assert event.finish_reason is not FinishReason.ERROR, event.error
    return tokens, probabilities, text


def close_tag(instruct_engine: LlamaCppEngine) -> list[int]:
    return instruct_engine.tokenize("</think>", special=True)


def test_an_opened_thought_is_closed_after_its_budget_and_the_model_answers(
    instruct_engine: LlamaCppEngine,
) -> None:
    prompt, grammar = QUESTION + "<think>\n", f"root ::= [a-z ]+ {AFTER_THOUGHT}"
    free, _, free_text = generate(instruct_engine, prompt, grammar, None, opened=True)
    tokens, logprobs, text = generate(instruct_engine, prompt, grammar, 8, opened=True, logprobs=2)
    close = close_tag(instruct_engine)
    assert tokens[:8] == free[:8]  # the same thought until the budget is spent…
    assert tokens[8 : 8 + len(close)] == close  # …then the tag, where the model wrote on
    assert free[8 : 8 + len(close)] != close and "</think>" not in free_text
    thought, answer = text.split("</think>")
    assert thought == instruct_engine.detokenize(tokens[:8])
    assert answer.lstrip().startswith("answer")  # the model took the closed thought up
    # Forced tokens report their log-probabilities as sampled ones do.
    assert [entry.chosen.token_id for entry in logprobs] == tokens
    assert all(len(entry.top) == 2 for entry in logprobs)


def test_budget_zero_closes_at_once_and_a_grammar_s_no_is_waited_out(
    instruct_engine: LlamaCppEngine,
) -> None:
    prompt = QUESTION + "<think>\n"
    close = close_tag(instruct_engine)
    tokens, _, _ = generate(
        instruct_engine, prompt, f"root ::= [a-z ]* {AFTER_THOUGHT}", 0, opened=True
    )
    assert tokens[: len(close)] == close
    # This grammar wants a letter first: the tag follows the first token.
    tokens, _, _ = generate(
        instruct_engine, prompt, f"root ::= [a-z ]+ {AFTER_THOUGHT}", 0, opened=True
    )
    assert tokens[1 : 1 + len(close)] == close


def test_a_thought_the_model_opens_is_counted_from_its_tag(instruct_engine: LlamaCppEngine) -> None:
    grammar = f'root ::= "<think>" [a-z ]+ {AFTER_THOUGHT}'
    tokens, _, text = generate(instruct_engine, QUESTION, grammar, 4, opened=False)
    pieces = [instruct_engine.detokenize([token]) for token in tokens]
    opened = next(i for i in range(len(pieces)) if "<think>" in "".join(pieces[: i + 1]))
    close = close_tag(instruct_engine)
    assert tokens[opened + 5 : opened + 5 + len(close)] == close
    assert text.count("</think>") == 1


def test_an_openai_client_s_effort_budget_closes_the_thought_and_the_answer_follows(
    start_hearth: Callable[[Sequence[str]], RunningServer], smollm2: Path
) -> None:
    template = Path(__file__).resolve().parents[3] / "fixtures" / "chat_templates"
    server = start_hearth(
        ["--model", str(smollm2), "--chat-template-file", str(template / "opens_thought.jinja")]
    )
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0)
    grammar = f"root ::= [a-z ]+ {AFTER_THOUGHT}"

    def ask(effort: str, stream: bool = False) -> tuple[str, str]:
        # KoboldCpp's shares: "minimal" is 10 % of max_tokens (4 tokens), "high" no budget.
        reply = client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "What is two and two?"}],
            max_tokens=40,
            temperature=0,
            reasoning_effort=effort,  # type: ignore[arg-type]
            stream=stream,
            extra_body={"grammar": grammar},
        )
        if not stream:
            message = reply.choices[0].message  # type: ignore[union-attr]
            return getattr(message, "reasoning_content", "") or "", message.content or ""
        thought = answer = ""
        for chunk in reply:  # type: ignore[union-attr]
            if chunk.choices:
                thought += getattr(chunk.choices[0].delta, "reasoning_content", None) or ""
                answer += chunk.choices[0].delta.content or ""
        return thought, answer

    budgeted_thought, budgeted_answer = ask("minimal")
    free_thought, _ = ask("high")
    assert budgeted_answer.startswith("answer")  # the model answered once it was closed
    assert budgeted_thought and free_thought.startswith(budgeted_thought)
    assert len(budgeted_thought) < len(free_thought)
    assert ask("minimal", stream=True) == (budgeted_thought, budgeted_answer)
