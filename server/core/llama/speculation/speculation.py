"""Speculative decoding's drafts: tokens guessed from n-grams of the text so far, which the
engine then checks in one decode (server/core/llama/engine.py, `LlamaCppEngine._sample`).

Plain Python, no llama.cpp: a drafter sees a sequence's tokens (prompt and reply so far) and
the token about to be decoded, and proposes what may follow. llama-server's two n-gram kinds
(its common/ngram-map.cpp `common_ngram_simple_draft` and common/speculative.cpp
`common_speculative_impl_ngram_mod`), same sizes and defaults:

- ngram-simple: the last `size_n` tokens are looked up earlier in the text; the tokens that
  followed their latest earlier occurrence, up to `size_m`, are the draft.
- ngram-mod: every `n_match` tokens of the text map to the token that followed them; the draft
  chains those lookups from the last `n_match` tokens, up to `n_max` tokens, and is dropped
  when fewer than `n_min` are found (only long repeats are worth it).

Apart from llama-server, on purpose: the tables belong to one request (llama-server shares
ngram-mod's across requests), so one client's text never shapes another's drafts and there is
nothing to reset; a match that runs into the text being written continues as its repetition (a
loop drafts its next turn); and every sequence has a `DraftPacer`, so drafts that miss shrink
and then pause: on text that does not repeat, speculation costs (almost) nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from server.core.load_settings import SpeculationSettings

# After a run of misses a sequence stops drafting for 1, 3, 7, ... steps, at most this many.
_LONGEST_PAUSE = 32
# The pacer's memory: each checked draft's figures weigh this much less at the next one.
_DECAY = 0.8


class Drafter(Protocol):
    def propose(self, tokens: Sequence[int], last: int, limit: int) -> list[int]:
        """At most `limit` tokens guessed to follow `tokens` and then `last`."""
        ...


class NgramSimple:
    """llama-server's ngram-simple for one sequence: the text's `size_n`-grams indexed by
    where they last occurred (their hashes, checked against the text on a hit), grown as the
    text grows, so a lookup costs the same at any length."""

    def __init__(self, size_n: int, size_m: int) -> None:
        self._n, self._m = max(1, size_n), size_m
        self._latest: dict[int, int] = {}  # hash of an n-gram -> where it last started
        self._indexed = 0  # n-grams starting before this position are in `_latest`

    def propose(self, tokens: Sequence[int], last: int, limit: int) -> list[int]:
        n, limit = self._n, min(limit, self._m)
        if limit <= 0 or len(tokens) < n:
            return []
        self._index(tokens)
        pattern = (*tokens[len(tokens) - n + 1 :], last) if n > 1 else (last,)
        start = self._latest.get(hash(pattern))
        if start is None or tuple(tokens[start : start + n]) != pattern:
            return []
        return _continued(tokens, last, start + n, limit)

    def _index(self, tokens: Sequence[int]) -> None:
        n, end = self._n, len(tokens) - self._n + 1
        if end < self._indexed:  # the text is not the one indexed (never in the engine)
            self._latest.clear()
            self._indexed = 0
        for start in range(self._indexed, end):  # later occurrences overwrite earlier ones
            self._latest[hash(tuple(tokens[start : start + n]))] = start
        self._indexed = max(self._indexed, end)


class NgramMod:
    """llama-server's ngram-mod for one sequence: each `n_match`-gram's hash maps to the
    token that last followed it; a draft chains lookups."""

    def __init__(self, n_match: int, n_min: int, n_max: int) -> None:
        self._n, self._min, self._max = max(1, n_match), n_min, n_max
        self._next: dict[int, int] = {}  # hash of an n-gram -> the token that followed it
        self._indexed = 0  # n-grams starting before this position are in `_next`

    def propose(self, tokens: Sequence[int], last: int, limit: int) -> list[int]:
        n = self._n
        if limit <= 0 or self._max <= 0 or len(tokens) < n:
            return []
        self._index(tokens)
        text = [*tokens[len(tokens) - n + 1 :], last] if n > 1 else [last]
        for _ in range(self._max):
            token = self._next.get(hash(tuple(text[len(text) - n :])))
            if token is None:
                break
            text.append(token)
        draft = text[n:]
        # Fewer than n_min found: not a repeat worth a draft (llama-server's rule).
        return draft[:limit] if draft and len(draft) >= self._min else []

    def _index(self, tokens: Sequence[int]) -> None:
        n, end = self._n, len(tokens) - self._n
        if end < self._indexed:
            self._next.clear()
            self._indexed = 0
        for start in range(self._indexed, end):
            self._next[hash(tuple(tokens[start : start + n]))] = tokens[start + n]
        self._indexed = max(self._indexed, end)


def _continued(tokens: Sequence[int], last: int, source: int, limit: int) -> list[int]:
    """`limit` tokens copied from position `source` on, in the text followed by `last` and by
    the draft itself (a source that reaches the end repeats the stretch since it)."""
    draft: list[int] = []
    length = len(tokens)
    for position in range(source, source + limit):
        if position < length:
            draft.append(tokens[position])
        elif position == length:
            draft.append(last)
        else:
            draft.append(draft[position - length - 1])
    return draft


class DraftPacer:
    """How many tokens a sequence's next draft may have, from how its last ones did.

    A rejected draft token costs a row of the decode for nothing (on a CPU with a large
    vocabulary, measured: nearly half a one-row decode each), while a draft shorter than what
    would have been accepted only leaves speed unused. So the next draft is as long as drafts
    were lately accepted between two breaks: the tokens accepted over the drafts that broke
    off before their end, recent ones weighing more (_DECAY). A copy accepted whole soon
    drafts `most` at once; text that repeats in short stretches drafts short. Two or more
    drafts in a row that miss from their first token pause drafting for 1, 3, 7, ... steps
    (at most _LONGEST_PAUSE), so text that does not repeat costs almost nothing; an accepted
    token ends the run of misses."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._run = 0.0  # tokens accepted, recent ones weighing more
        self._breaks = 0.0  # drafts that broke off before their end, the same way
        self._misses = 0
        self._pause = 0

    @property
    def limit(self) -> int:
        """The longest next draft: the tokens accepted per break, between 1 and `most`
        (`most` until a draft breaks off, as llama-server drafts)."""
        if self._breaks == 0:
            return self.most
        return max(1, min(self.most, round(self._run / self._breaks)))

    def allowance(self) -> int:
        """The cap on this step's draft (0 while paused; a paused step counts down)."""
        if self._pause > 0:
            self._pause -= 1
            return 0
        return self.limit

    def verified(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        self._run = self._run * _DECAY + accepted
        self._breaks = self._breaks * _DECAY + (1 if accepted < drafted else 0)
        if accepted > 0:
            self._misses = 0
            return
        self._misses += 1
        if self._misses >= 2:
            self._pause = min(2 ** (self._misses - 1) - 1, _LONGEST_PAUSE)


class Speculator:
    """One sequence's speculation: its drafter, its pacer, and its counts (llama-server's
    `draft_n`, `draft_n_accepted` and verification steps)."""

    def __init__(self, drafter: Drafter, most: int) -> None:
        self._drafter = drafter
        self._pacer = DraftPacer(most)
        self.drafted = 0
        self.accepted = 0
        self.steps = 0

    def draft(self, tokens: Sequence[int], last: int, room: int) -> list[int]:
        """A draft of at most `room` tokens to decode after `last` (which follows `tokens`)."""
        if room <= 0:
            return []
        limit = min(self._pacer.allowance(), room)
        return self._drafter.propose(tokens, last, limit) if limit > 0 else []

    def checking(self, drafted: int) -> None:
        """A draft of `drafted` tokens is being checked (each token kept adds to
        `accepted` as it is)."""
        if drafted > 0:
            self.drafted += drafted
            self.steps += 1

    def checked(self, drafted: int, accepted: int) -> None:
        """The draft was checked and its first `accepted` tokens kept: pace the next."""
        self._pacer.verified(drafted, accepted)


class DraftSource(Protocol):
    """A draft model (server/core/llama/speculation/draft_model.py): a drafter for each sequence
    id."""

    def drafter(self, seq_id: int, settings: SpeculationSettings) -> Drafter: ...


def speculators(
    settings: SpeculationSettings, draft_model: DraftSource | None = None
) -> Callable[[int], Speculator] | None:
    """What gives each new sequence (by its sequence id) its Speculator under `settings`;
    None when speculation is off (or its kind drafts nothing: a size of 0). A draft model,
    when there is one, drafts rather than n-grams."""
    if draft_model is not None and settings.draft_max > 0:
        most = settings.draft_max
        return lambda seq_id: Speculator(draft_model.drafter(seq_id, settings), most)
    if settings.kind == "ngram-simple" and settings.ngram_size_m > 0:
        n, m = settings.ngram_size_n, settings.ngram_size_m
        return lambda _seq_id: Speculator(NgramSimple(n, m), m)
    if settings.kind == "ngram-mod" and settings.mod_n_max > 0:
        match, low, high = settings.mod_n_match, settings.mod_n_min, settings.mod_n_max
        return lambda _seq_id: Speculator(NgramMod(match, low, high), high)
    return None


def describe(settings: SpeculationSettings) -> list[str]:
    """The console's lines about speculative decoding under `settings` (none when off)."""
    if settings.draft_model:
        line = (
            f"Speculative decoding: the draft model {Path(settings.draft_model).name} "
            f"(drafts of up to {settings.draft_max} tokens"
        )
        line += f", at least {settings.draft_min})" if settings.draft_min > 1 else ")"
        if settings.kind != "none":
            line += f"; --spec-type {settings.kind} is not used beside it"
        return [line]
    if settings.kind == "ngram-simple":
        return [
            f"Speculative decoding: ngram-simple (lookups of {settings.ngram_size_n} tokens, "
            f"drafts of up to {settings.ngram_size_m})"
        ]
    if settings.kind == "ngram-mod":
        return [
            f"Speculative decoding: ngram-mod (lookups of {settings.mod_n_match} tokens, "
            f"drafts of {settings.mod_n_min} to {settings.mod_n_max})"
        ]
    return []
