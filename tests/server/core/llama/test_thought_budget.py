"""The thinking budget's bookkeeping (server/core/llama/sequences/thinking.py): where a thought
opens and closes in a stream of token pieces, when its end tag is due, and what holds it back."""

from __future__ import annotations

from server.core.llama.sequences.thinking import ThoughtBudget
from server.core.types import GenerationRequest

CLOSE = [901, 902]  # "</think>" as two tokens


def budget(
    tokens: int, *, open_at_start: bool = False, allowed: bool = True
) -> tuple[ThoughtBudget, list[list[int]]]:
    asked: list[list[int]] = []

    def allow(tokens: list[int]) -> bool:
        asked.append(tokens)
        return allowed

    request = GenerationRequest("r", "p", 64, thinking_open=open_at_start, reasoning_budget=tokens)
    return ThoughtBudget(request, tokens, CLOSE, allow), asked


def feed(thought: ThoughtBudget, *pieces: bytes) -> list[int | None]:
    """Each piece as a sampled token; what the budget would force after each."""
    forced = []
    for piece in pieces:
        thought.saw(piece)
        forced.append(thought.next_forced())
    return forced


def test_a_thought_the_template_opened_is_closed_after_its_budget() -> None:
    thought, _ = budget(3, open_at_start=True)
    assert feed(thought, b"a", b"b") == [None, None]
    assert feed(thought, b"c") == [901]  # three thought tokens, then the tag
    assert thought.next_forced() == 902
    thought.saw(b"</thi")
    thought.saw(b"nk>")
    assert not thought.inside
    assert feed(thought, b" the answer", b" goes on") == [None, None]


def test_budget_zero_closes_an_opened_thought_at_once() -> None:
    thought, _ = budget(0, open_at_start=True)
    assert thought.next_forced() == 901


def test_a_thought_the_model_opens_counts_from_its_tag_even_split_across_tokens() -> None:
    thought, _ = budget(2)
    assert feed(thought, b"Hmm <th", b"ink>") == [None, None]  # the tag's token: not counted
    assert thought.inside
    assert feed(thought, b"x", b"y") == [None, 901]


def test_a_model_closing_its_own_thought_ends_the_count_and_a_new_thought_starts_afresh() -> None:
    thought, _ = budget(3, open_at_start=True)
    assert feed(thought, b"a", b"b</think>", b"answer <think>", b"c", b"d") == [None] * 5
    assert feed(thought, b"e") == [901]


def test_no_tag_splits_a_character() -> None:
    thought, _ = budget(1, open_at_start=True)
    euro = "€".encode()  # three bytes, here in two tokens
    assert feed(thought, euro[:2]) == [None]  # the budget is spent mid-character
    assert feed(thought, euro[2:]) == [901]


def test_a_grammar_that_forbids_the_tag_is_asked_again_after_each_token() -> None:
    thought, asked = budget(1, open_at_start=True, allowed=False)
    assert feed(thought, b"a", b"b") == [None, None]
    assert asked == [CLOSE, CLOSE]
