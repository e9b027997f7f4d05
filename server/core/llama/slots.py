"""The KV cache's sequences ("slots"): which tokens each holds, reusing a shared prefix, and
KoboldCpp's ContextShift."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import llama_cpp as llama

logger = logging.getLogger(__name__)

# With parallel slots, prompts are decoded in blocks of this many tokens aligned to absolute
# positions, and only whole blocks are reused from the cache. llama.cpp's logits depend on
# where a sequence's prompt is cut into decode calls (measured: up to 0.6 apart on the bundled
# model); fixed cuts keep that part alike whatever its slot held before. Which other sequences
# share a decode still moves the last bits on some CPUs (a near-tied token may flip), so a
# seed's text alone and batched is close, not promised equal (tests compare logits there).
PROMPT_BLOCK = 64
# ContextShift looks for the new prompt's first tokens after the kept head (this many must
# match) and shifts only when at least _SHIFT_MIN_TOKENS line up; less is cheaper to redo.
_SHIFT_PROBE = 8
_SHIFT_MIN_TOKENS = 32


@dataclass(eq=False)
class Slot:
    """One sequence of the KV cache and the tokens it holds."""

    seq_id: int
    cached: list[int] = field(default_factory=list)


def shared_prefix(first: list[int], second: list[int]) -> int:
    length = min(len(first), len(second))
    index = 0
    while index < length and first[index] == second[index]:
        index += 1
    return index


class SlotCache:
    """The slots of one context and what each caches."""

    def __init__(self, memory: Any, count: int, *, reuse_prefix: bool, context_shift: bool):
        self._memory = memory
        self.slots = [Slot(seq_id) for seq_id in range(count)]
        self._reuse_prefix = reuse_prefix
        # KoboldCpp's ContextShift; parallel requests turn it off, as there.
        self.context_shift = context_shift and count == 1

    @property
    def blocked(self) -> bool:
        """Prompts go in aligned blocks (see PROMPT_BLOCK): with more than one slot."""
        return len(self.slots) > 1

    def best_free(self, busy: set[Slot], prompt: list[int]) -> Slot | None:
        """The free slot whose cache shares the longest prefix with `prompt`."""
        free = [slot for slot in self.slots if slot not in busy]
        return max(free, key=lambda s: shared_prefix(s.cached, prompt)) if free else None

    def prepare(self, slot: Slot, prompt: list[int]) -> int:
        """Drop what the slot caches beyond the shared prefix; return how many tokens stay."""
        keep = 0
        if self._reuse_prefix:
            # Always re-decode the prompt's last token: its logits start the reply.
            keep = min(shared_prefix(slot.cached, prompt), len(prompt) - 1)
            if self.blocked:
                keep -= keep % PROMPT_BLOCK  # reuse whole blocks only
            elif self.context_shift:
                shifted = self._shift(slot, prompt, keep)
                if shifted is not None:
                    return shifted
        if keep < len(slot.cached) and not llama.llama_memory_seq_rm(
            self._memory, slot.seq_id, keep, -1
        ):
            self.forget(slot)
            keep = 0
        del slot.cached[keep:]
        return keep

    def forget(self, slot: Slot) -> None:
        llama.llama_memory_seq_rm(self._memory, slot.seq_id, -1, -1)  # never fails
        slot.cached.clear()

    def _shift(self, slot: Slot, prompt: list[int], keep: int) -> int | None:
        """ContextShift: when the prompt is the cached one with a stretch after the shared head
        cut out (a chat that outgrew the context and was trimmed at the front), drop that
        stretch from the KV cache and move what follows back, instead of recomputing it.
        Returns the tokens now reusable, or None when the cache does not line up."""
        cached = slot.cached
        probe = prompt[keep : keep + _SHIFT_PROBE]
        if len(probe) < _SHIFT_PROBE or len(cached) - keep <= _SHIFT_PROBE:
            return None
        # Every offset where the probe fits is a candidate (repetitive text has several);
        # the one lining up the most tokens is the real cut.
        best = (0, 0)
        for offset in range(1, len(cached) - keep - _SHIFT_PROBE + 1):
            if cached[keep + offset : keep + offset + _SHIFT_PROBE] == probe:
                length = shared_prefix(cached[keep + offset :], prompt[keep:])
                best = max(best, (length, offset))
        moved, dropped = min(best[0], len(prompt) - 1 - keep), best[1]
        if moved < _SHIFT_MIN_TOKENS:
            return None
        start, end = keep + dropped, keep + dropped + moved
        memory, seq_id = self._memory, slot.seq_id
        if not (
            llama.llama_memory_seq_rm(memory, seq_id, end, -1)
            and llama.llama_memory_seq_rm(memory, seq_id, keep, start)
        ):
            self.forget(slot)
            return 0
        llama.llama_memory_seq_add(memory, seq_id, start, end, -dropped)
        slot.cached = cached[:keep] + cached[start:end]
        logger.info("ContextShift: kept %d cached tokens, dropped %d", keep + moved, dropped)
        return keep + moved
