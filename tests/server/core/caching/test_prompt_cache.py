"""PromptCache on its own: which saved state a prompt finds, what is kept and what is dropped
under its bounds, and the figures it reports (the engine's use of it is tested with the model).
"""

from __future__ import annotations

import dataclasses

from server.core.caching.prompt_cache import (
    PromptCache,
    PromptCacheStats,
    SavedState,
    common_prefix,
)


def state(*tokens: int, size: int = 100) -> SavedState:
    return SavedState(tuple(tokens), data=object(), size=size)


def held(cache: PromptCache, *states: SavedState) -> list[bool]:
    """Whether each of `states` is still offered (found as the best match for its tokens)."""
    return [cache.best(one.tokens)[0] is one for one in states]


def test_common_prefix_counts_the_leading_tokens_both_share() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([9, 2], [1, 2]) == 0


def test_a_prompt_finds_the_state_sharing_its_longest_prefix() -> None:
    cache = PromptCache(max_bytes=10_000)
    short, long, other = state(1, 2), state(1, 2, 3, 4, 5), state(7, 8, 9)
    for one in (long, other):
        assert cache.put(one)
    cache.put(short)  # a prefix of `long`: a new state drops only those it contains
    assert cache.stats().states == 3
    assert cache.best([1, 2, 3, 9]) == (long, 3)
    assert cache.best([1, 2, 3, 4, 5, 6]) == (long, 5)
    assert cache.best([7, 8]) == (other, 2)
    assert cache.best([5, 5]) == (None, 0)
    assert cache.best([]) == (None, 0)


def test_a_state_replaces_those_it_contains_without_counting_an_eviction() -> None:
    cache = PromptCache(max_bytes=10_000)
    first, other = state(1, 2, 3), state(4, 5)
    cache.put(first)
    cache.put(other)
    longer = state(1, 2, 3, 4)
    assert cache.put(longer)
    assert cache.best([1, 2, 3]) == (longer, 3)
    assert held(cache, first, other, longer) == [False, True, True]
    stats = cache.stats()
    assert (stats.states, stats.bytes, stats.saved, stats.evicted) == (2, 200, 3, 0)
    same = state(1, 2, 3, 4)  # the same tokens saved again: the newer one is kept
    cache.put(same)
    assert held(cache, longer, same) == [False, True] and cache.stats().states == 2


def test_covers_says_whether_a_state_already_holds_all_of_the_tokens() -> None:
    cache = PromptCache(max_bytes=10_000)
    cache.put(state(1, 2, 3))
    assert cache.covers([1, 2]) and cache.covers([1, 2, 3])
    assert not cache.covers([1, 2, 3, 4])
    assert not cache.covers([1, 3])
    assert not PromptCache(max_bytes=10_000).covers([1])


def test_the_byte_bound_drops_the_least_recently_used_first() -> None:
    cache = PromptCache(max_bytes=300)
    a, b, c, d = state(1), state(2), state(3), state(4)
    for one in (a, b, c):
        cache.put(one)
    cache.used(a, 1)  # restored: now the most recent, so b is the oldest
    cache.put(d)
    assert held(cache, a, b, c, d) == [True, False, True, True]
    stats = cache.stats()
    assert (stats.states, stats.bytes, stats.max_bytes, stats.evicted) == (3, 300, 300, 1)
    big = state(5, size=250)  # room for it alone: every older one goes but the newest
    cache.put(big)
    assert held(cache, a, c, d, big) == [False, False, False, True]
    assert cache.stats().evicted == 4 and cache.stats().bytes == 250


def test_the_count_bound_drops_the_least_recently_used_first_within_the_byte_bound() -> None:
    cache = PromptCache(max_bytes=10_000, max_states=2)
    a, b, c = state(1), state(2), state(3)
    cache.put(a)
    cache.put(b)
    cache.used(a, 1)
    cache.put(c)
    assert held(cache, a, b, c) == [True, False, True]
    assert (cache.stats().states, cache.stats().evicted) == (2, 1)


def test_a_state_bigger_than_the_bound_or_a_disabled_cache_keeps_nothing() -> None:
    cache = PromptCache(max_bytes=100)
    kept = state(1, size=100)
    assert cache.put(kept)  # exactly the bound fits
    assert not cache.put(state(2, size=101))
    assert held(cache, kept) == [True]
    assert (cache.stats().saved, cache.stats().evicted) == (1, 0)
    off = PromptCache(max_bytes=0)
    assert not off.enabled and not off.put(state(1, size=1))
    assert off.stats() == PromptCacheStats()


def test_restores_count_the_tokens_they_spared_and_discard_and_clear_forget() -> None:
    cache = PromptCache(max_bytes=10_000)
    a, b = state(1, 2, 3), state(4, 5)
    cache.put(a)
    cache.put(b)
    cache.used(a, 3)
    cache.used(b, 1)
    stats = cache.stats()
    assert (stats.restored, stats.restored_tokens) == (2, 4)
    cache.discard(a)
    cache.discard(a)  # already gone: nothing happens
    assert held(cache, a, b) == [False, True]
    cache.clear()
    stats = cache.stats()
    assert (stats.states, stats.bytes) == (0, 0)
    assert (stats.saved, stats.restored, stats.evicted) == (2, 2, 0)  # use so far stays


def test_stats_are_a_copy_and_plus_sums_every_field() -> None:
    cache = PromptCache(max_bytes=1000)
    cache.put(state(1))
    taken = cache.stats()
    cache.put(state(2))
    assert (taken.saved, taken.states) == (1, 1)  # the copy does not follow the cache
    names = [field.name for field in dataclasses.fields(PromptCacheStats)]
    first = PromptCacheStats(**{name: index + 1 for index, name in enumerate(names)})
    second = PromptCacheStats(**{name: 10 * (index + 1) for index, name in enumerate(names)})
    total = first.plus(second)
    assert [getattr(total, name) for name in names] == [11 * (i + 1) for i in range(len(names))]
    assert "max_bytes" in names and first.plus(PromptCacheStats()) == first
