"""The n-gram drafters of speculative decoding and their pacer
(server/core/llama/speculation/speculation.py), without a model: against brute-force versions of
their rules (llama.cpp's, with the differences speculation.py names), on random texts."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from server.core.llama.sequences.sequence import joined_text
from server.core.llama.speculation.speculation import (
    Drafter,
    DraftPacer,
    NgramMod,
    NgramSimple,
    Speculator,
    describe,
    speculators,
)
from server.core.load_settings import SpeculationSettings
from server.core.types import (
    EngineReport,
    FinishReason,
    GenerationOutcome,
    TokenChoice,
    TokenEvent,
    TokenLogprob,
)


def continuation(text: list[int], source: int, limit: int) -> list[int]:
    """What copying from `source` on gives, the copy feeding itself past the text's end."""
    out = list(text)
    for position in range(source, source + limit):
        out.append(out[position])
    return out[len(text) :]


def simple_reference(tokens: list[int], last: int, n: int, m: int, limit: int) -> list[int]:
    """llama.cpp's common_ngram_simple_draft, searched backwards from the end: the latest
    earlier occurrence of the last n tokens (ending at `last`), and what followed it."""
    text = [*tokens, last]
    pattern = text[len(text) - n :]
    for start in range(len(text) - n - 1, -1, -1):
        if text[start : start + n] == pattern:
            return continuation(text, start + n, min(limit, m))
    return []


def mod_reference(tokens: list[int], last: int, n: int, low: int, high: int) -> list[int]:
    """ngram-mod without hashing: each n tokens of `tokens` map to the token that last
    followed them; lookups chain from the last n tokens (ending at `last`)."""
    following = {tuple(tokens[i : i + n]): tokens[i + n] for i in range(len(tokens) - n)}
    text = [*tokens, last]
    for _ in range(high):
        token = following.get(tuple(text[len(text) - n :]))
        if token is None:
            break
        text.append(token)
    draft = text[len(tokens) + 1 :]
    return draft if draft and len(draft) >= low else []


def test_ngram_simple_drafts_what_followed_the_latest_earlier_occurrence() -> None:
    drafter = NgramSimple(size_n=3, size_m=48)
    tokens = [1, 2, 3, 10, 11, 12, 9, 1, 2, 3, 20, 21, 22, 9, 1, 2]
    # The last three tokens (1, 2 and then 3) occur twice before: the later one wins.
    assert drafter.propose(tokens, 3, limit=4) == [20, 21, 22, 9]
    assert drafter.propose(tokens, 5, limit=4) == []  # (1, 2, 5) never occurred


def test_ngram_simple_keeps_to_its_sizes() -> None:
    tokens = [5, 6, 7, 8, 9, 10, 11, 12, 5, 6]
    assert NgramSimple(size_n=3, size_m=2).propose(tokens, 7, limit=10) == [8, 9]
    assert NgramSimple(size_n=3, size_m=48).propose(tokens, 7, limit=3) == [8, 9, 10]
    assert NgramSimple(size_n=3, size_m=48).propose(tokens, 7, limit=0) == []
    assert NgramSimple(size_n=4, size_m=48).propose(tokens, 7, limit=3) == []  # 4 never match


def test_a_match_running_into_the_text_repeats_it() -> None:
    # A loop: what the text is writing now continues as its last turn did.
    assert NgramSimple(size_n=2, size_m=48).propose([7, 1, 2, 1, 2, 1], 2, 5) == [1, 2, 1, 2, 1]
    assert NgramSimple(size_n=3, size_m=48).propose([4, 4, 4], 4, 3) == [4, 4, 4]


@pytest.mark.parametrize("seed", range(6))
def test_ngram_simple_agrees_with_a_brute_force_search_as_the_text_grows(seed: int) -> None:
    """One drafter over a growing text (its index grows with it) against a search of the
    whole text each time; a small vocabulary makes repeats common."""
    rng = random.Random(seed)
    n, m = rng.choice([(1, 4), (2, 8), (3, 5), (4, 48)])
    drafter = NgramSimple(size_n=n, size_m=m)
    tokens = [rng.randrange(4) for _ in range(5)]
    hits = 0
    for _ in range(300):
        last, limit = rng.randrange(4), rng.randrange(0, 12)
        expected = simple_reference(tokens, last, n, m, limit)
        assert drafter.propose(tokens, last, limit) == expected, (tokens, last)
        hits += bool(expected)
        # Sometimes several tokens at once, as when a draft was accepted.
        tokens += [last] + [rng.randrange(4) for _ in range(rng.choice([0, 0, 2]))]
    assert hits > 30


@pytest.mark.parametrize("seed", range(6))
def test_ngram_mod_agrees_with_its_rule_as_the_text_grows(seed: int) -> None:
    rng = random.Random(seed)
    n, low, high = rng.choice([(1, 0, 4), (2, 2, 8), (3, 4, 6), (2, 0, 64)])
    drafter = NgramMod(n_match=n, n_min=low, n_max=high)
    tokens = [rng.randrange(3) for _ in range(4)]
    hits = 0
    for _ in range(300):
        last = rng.randrange(3)
        expected = mod_reference(tokens, last, n, low, high)
        assert drafter.propose(tokens, last, limit=100) == expected, (tokens, last)
        hits += bool(expected)
        tokens += [last]
    assert hits > 30


def test_ngram_mod_drops_a_chain_shorter_than_n_min_and_cuts_to_the_limit() -> None:
    tokens = [1, 2, 3, 4, 5, 6, 9, 9, 1]
    # (1, 2) -> 3 -> 4 -> 5 -> 6 -> 9 -> 9 -> 1 -> 2 -> ...: as long as n_max allows.
    assert NgramMod(n_match=2, n_min=0, n_max=5).propose(tokens, 2, 3) == [3, 4, 5]
    assert NgramMod(n_match=2, n_min=0, n_max=5).propose(tokens, 2, 9) == [3, 4, 5, 6, 9]
    # (2, 3) -> 4 -> 0 -> 2, then nothing is known to follow (0, 2): a chain of three.
    short = [2, 3, 4, 0, 2]
    assert NgramMod(n_match=2, n_min=3, n_max=8).propose(short, 3, 10) == [4, 0, 2]
    assert NgramMod(n_match=2, n_min=4, n_max=8).propose(short, 3, 10) == []


def test_the_pacer_drafts_as_long_as_drafts_were_accepted() -> None:
    pacer = DraftPacer(48)
    assert pacer.allowance() == 48  # the longest until a draft breaks off, as llama-server
    pacer.verified(48, 48)  # accepted whole: a copy
    assert pacer.allowance() == 48
    for _ in range(20):  # text repeating in stretches of three tokens
        pacer.verified(pacer.allowance(), 3)
    assert pacer.allowance() in (3, 4)  # 3 drafted are all accepted, then one more is tried
    for _ in range(10):  # a copy again: drafts grow back
        pacer.verified(pacer.allowance(), pacer.limit)
    assert pacer.allowance() == 48


def test_the_pacer_pauses_drafts_that_keep_missing() -> None:
    pacer = DraftPacer(48)
    pacer.verified(48, 0)  # one miss shortens the next draft
    assert 1 <= pacer.allowance() < 48
    pacer.verified(pacer.limit, 0)  # a second in a row also pauses a step
    assert pacer.allowance() == 0 and pacer.allowance() > 0
    pacer.verified(pacer.limit, 0)
    assert [pacer.allowance() for _ in range(3)] == [0, 0, 0] and pacer.allowance() > 0
    pacer.verified(pacer.limit, 1)  # an accepted token ends the run of misses
    pacer.verified(pacer.limit, 0)
    assert pacer.allowance() > 0


def test_drafts_that_always_miss_cost_few_rows() -> None:
    """Text that does not repeat: what a drafter that always misses costs over many steps
    stays a small share of a row per step."""
    pacer = DraftPacer(48)
    wasted = 0
    steps = 2000
    for _ in range(steps):
        allowed = pacer.allowance()
        if allowed:
            pacer.verified(allowed, 0)
            wasted += allowed
    assert wasted < 0.1 * steps


def test_a_speculator_counts_what_was_drafted_and_accepted() -> None:
    speculator = Speculator(NgramSimple(2, 8), 8)
    tokens = [1, 2, 3, 4, 5, 1]
    draft = speculator.draft(tokens, 2, room=3)
    assert draft == [3, 4, 5]
    assert speculator.draft(tokens, 2, room=0) == []
    speculator.checking(3)
    speculator.accepted += 2
    speculator.checked(3, 2)
    speculator.checking(0)  # no draft: no step
    speculator.checked(0, 0)
    assert (speculator.drafted, speculator.accepted, speculator.steps) == (3, 2, 1)
    assert len(speculator.draft(tokens, 2, room=48)) < 16  # shorter after a break


def test_settings_choose_the_drafter() -> None:
    assert speculators(SpeculationSettings()) is None
    assert describe(SpeculationSettings()) == []
    simple = speculators(SpeculationSettings(kind="ngram-simple", ngram_size_n=2))
    assert simple is not None
    assert simple(0).draft([1, 2, 3, 1], 2, room=8) == [3, 1, 2, 3, 1, 2, 3, 1]
    assert simple(0) is not simple(0)  # one per sequence: nothing shared between requests
    mod = speculators(SpeculationSettings(kind="ngram-mod", mod_n_match=1, mod_n_min=1))
    assert mod is not None and mod(0).draft([1, 2, 3, 1], 2, room=2) == [3, 1]
    assert speculators(SpeculationSettings(kind="ngram-mod", mod_n_max=0)) is None


class _Guesser:
    """A draft model that guesses 7s, and says which sequence asked."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def drafter(self, seq_id: int, settings: SpeculationSettings) -> Drafter:
        asked = self.asked

        class Sevens:
            def propose(self, tokens: Sequence[int], last: int, limit: int) -> list[int]:
                asked.append(seq_id)
                return [7] * limit

        return Sevens()


def test_a_draft_model_drafts_rather_than_ngrams() -> None:
    settings = SpeculationSettings(kind="ngram-simple", draft_model="small.gguf", draft_max=3)
    guesser = _Guesser()
    made = speculators(settings, guesser)
    assert made is not None
    assert made(1).draft([1, 2, 3, 1], 2, room=8) == [7, 7, 7]  # draft_max, not the room
    assert made(0).draft([1, 2], 2, room=2) == [7, 7]
    assert guesser.asked == [1, 0]  # each sequence drafts in its own draft-model sequence
    lines = describe(settings)
    assert lines == [
        "Speculative decoding: the draft model small.gguf (drafts of up to 3 tokens); "
        "--spec-type ngram-simple is not used beside it"
    ]
    assert speculators(replace(settings, draft_max=0), guesser) is not None  # n-grams then


def test_the_tokens_of_one_decode_go_out_as_one_event() -> None:
    def logprob(token: int) -> TokenLogprob:
        return TokenLogprob(TokenChoice(token, b"x", -0.5), ())

    outcome = GenerationOutcome(FinishReason.STOP)
    reports: list[tuple[object, EngineReport]] = [
        ("seq", TokenEvent("de", (1, 2), (logprob(1), logprob(2)))),
        ("seq", TokenEvent("f ", (3,), (logprob(3),))),
        ("seq", TokenEvent("", (4,), (logprob(4),))),
        ("seq", outcome),
    ]
    assert joined_text(reports) == [
        ("seq", TokenEvent("def ", (1, 2, 3, 4), tuple(logprob(t) for t in (1, 2, 3, 4)))),
        ("seq", outcome),
    ]
    one: list[tuple[object, EngineReport]] = [("seq", TokenEvent("a", (1,)))]
    assert joined_text(one) == one
