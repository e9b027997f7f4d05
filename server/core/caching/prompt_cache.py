"""Processed prompts kept after their slot moved on, found again by their tokens.

A returning user's conversation was read before; reading it again costs a second for every
thousand tokens on a small CPU. When a slot is about to drop what it holds (another user's
prompt shares little of it), the engine saves that sequence's KV state here, keyed by its
tokens; a new prompt is matched against every saved state by longest common token prefix, and
the engine restores the best one when it beats what any slot still holds. llama-server keeps
such states in RAM (`--cache-ram`), KoboldCpp in "SmartCache" slots; here both bounds apply.

Plain Python: the states are opaque bytes (llama.cpp's per-sequence state) to this module,
which only decides what to keep, what to find and what to drop (least recently used first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIB = 1 << 20


@dataclass(frozen=True, eq=False)
class SavedState:
    """One sequence's KV state and the tokens it holds, in order from position 0."""

    tokens: tuple[int, ...]
    data: Any  # the engine's own buffer (a ctypes array): opaque here
    size: int  # bytes
    # Whose it is, when the cache is private (--privatecache): only a request of the same
    # owner may have it restored. "" when states are shared.
    owner: str = ""


def common_prefix(first: Sequence[int], second: Sequence[int]) -> int:
    length = min(len(first), len(second))
    index = 0
    while index < length and first[index] == second[index]:
        index += 1
    return index


@dataclass
class PromptCacheStats:
    """What /metrics and the console show: use so far, and what is held now."""

    saved: int = 0  # states saved
    restored: int = 0  # states restored into a slot
    restored_tokens: int = 0  # prompt tokens those restores saved from being read again
    evicted: int = 0  # states dropped for room (least recently used first)
    states: int = 0  # held now
    bytes: int = 0  # held now
    max_bytes: int = 0  # the bound on `bytes` (summed over a pool's engines)
    disk_states: int = 0  # held now in --cachedir (0 without one)
    disk_bytes: int = 0
    disk_max_bytes: int = 0  # --cachedisk; 0: no folder

    def plus(self, other: PromptCacheStats) -> PromptCacheStats:
        """Every field summed: several engines' caches, or one's closed before."""
        return PromptCacheStats(
            **{name: value + getattr(other, name) for name, value in vars(self).items()}
        )


class PromptCache:
    """Saved states under a byte bound and, optionally, a count bound (KoboldCpp's
    `smartcache N`). Thread-safe: the worker saves and restores, the event loop reads stats."""

    def __init__(self, max_bytes: int, max_states: int = 0) -> None:
        self.max_bytes = max_bytes
        self.max_states = max_states  # 0: bounded by bytes alone
        # Held states, oldest use first (a state hashes by identity: it is its own key).
        self._states: OrderedDict[SavedState, None] = OrderedDict()
        self._lock = threading.Lock()
        self._stats = PromptCacheStats()

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def stats(self) -> PromptCacheStats:
        with self._lock:
            held = sum(state.size for state in self._states)
            return PromptCacheStats(
                **{
                    **vars(self._stats),
                    "states": len(self._states),
                    "bytes": held,
                    "max_bytes": self.max_bytes,
                }
            )

    def best(self, prompt: Sequence[int], owner: str = "") -> tuple[SavedState | None, int]:
        """`owner`'s saved state sharing the longest token prefix with `prompt`, and that
        length."""
        with self._lock:
            found, length = None, 0
            for state in self._states:
                if state.owner != owner:
                    continue
                shared = common_prefix(state.tokens, prompt)
                if shared > length:
                    found, length = state, shared
            return found, length

    def covers(self, tokens: Sequence[int], owner: str = "") -> bool:
        """Whether a saved state of `owner` already holds all of `tokens` (maybe more)."""
        with self._lock:
            return any(
                state.owner == owner
                and len(state.tokens) >= len(tokens)
                and common_prefix(state.tokens, tokens) == len(tokens)
                for state in self._states
            )

    def put(self, state: SavedState) -> bool:
        """Keep `state`, dropping saved states it contains (their tokens are a prefix of its)
        and then the least recently used until both bounds hold. False: it alone is too big."""
        if not self.enabled or state.size > self.max_bytes:
            return False
        with self._lock:
            for held in list(self._states):
                if held.owner != state.owner:
                    continue
                if common_prefix(held.tokens, state.tokens) == len(held.tokens):
                    del self._states[held]  # all it holds, the new one holds too
            self._states[state] = None
            self._stats.saved += 1
            self._evict_beyond_bounds()
            return True

    def used(self, state: SavedState, tokens: int) -> None:
        """`state` was restored, saving `tokens` prompt tokens: it becomes the most recent."""
        with self._lock:
            if state in self._states:
                self._states.move_to_end(state)
            self._stats.restored += 1
            self._stats.restored_tokens += tokens

    def discard(self, state: SavedState) -> None:
        """Forget a state that failed to restore: it will not be offered again."""
        with self._lock:
            self._states.pop(state, None)

    def clear(self) -> None:
        with self._lock:
            self._states.clear()

    def _evict_beyond_bounds(self) -> None:
        held = sum(state.size for state in self._states)
        while self._states and (
            held > self.max_bytes or (self.max_states and len(self._states) > self.max_states)
        ):
            oldest, _ = self._states.popitem(last=False)
            held -= oldest.size
            self._stats.evicted += 1
