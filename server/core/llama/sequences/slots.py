"""The KV cache's sequences ("slots"): which tokens each holds, reusing a shared prefix,
KoboldCpp's ContextShift, and the prompt cache (server/core/caching/prompt_cache.py): what a slot is
about to drop is saved first, and a saved state that beats the slot's own is restored into it."""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp as llama

from server.core.caching.prompt_cache import MIB, SavedState, common_prefix
from server.core.caching.prompt_disk import DiskStates
from server.core.caching.state_store import StateStore
from server.core.llama.loading.model import LoadedModel
from server.core.load_settings import LoadSettings
from server.models.gguf import file_sha256

logger = logging.getLogger(__name__)

# With parallel slots, prompts are decoded in blocks of this many tokens aligned to absolute
# positions (server/core/llama/sequences/batch.py). llama.cpp's logits depend on where a sequence's
# prompt is cut into decode calls (measured: up to 0.6 apart on the bundled model); fixed cuts
# keep a fresh read alike alone or batched. A cached prefix is reused whole, as llama-server
# does: a returning conversation reads only its new tokens (up to the next block boundary,
# then whole blocks), which costs the last bits of that first block's cut — cutting the cache
# back to a block boundary instead made returning users read up to 63 tokens again (2x
# llama-server's time to first token in bench/prompt_cache.py --parallel 4). Which other
# sequences share a decode moves the last bits too, so a seed's text alone and batched is
# close, not promised equal (tests compare logits there).
PROMPT_BLOCK = 64  # smaller in a batch of under 128 rows (server/core/llama/batch.block_size)
# ContextShift looks for the new prompt's first tokens after the kept head (this many must
# match) and shifts only when at least _SHIFT_MIN_TOKENS line up; less is cheaper to redo.
_SHIFT_PROBE = 8
_SHIFT_MIN_TOKENS = 32
# A slot saves what it holds before dropping at least this many of its tokens (fewer are
# quicker to read again than to copy), and a saved state is restored when it spares reading
# at least this many more prompt tokens than the slot's own cache does.
_WORTH_SAVING = 64


@dataclass(eq=False)
class Slot:
    """One sequence of the KV cache and the tokens it holds."""

    seq_id: int
    cached: list[int] = field(default_factory=list)
    owner: str = ""  # whose tokens `cached` are, when the cache is private ("" otherwise)


class SlotCache:
    """The slots of one context, what each caches, and the states saved from them."""

    def __init__(
        self,
        context: Any,
        count: int,
        *,
        reuse_prefix: bool,
        context_shift: bool,
        saved: StateStore | None = None,
        private: bool = False,
    ):
        self._context = context
        self._memory = llama.llama_get_memory(context)
        self.slots = [Slot(seq_id) for seq_id in range(count)]
        self.latest = self.slots[0]  # the slot a request was put in last
        self._reuse_prefix = reuse_prefix
        # KoboldCpp's ContextShift; parallel requests turn it off, as there.
        self.context_shift = context_shift and count == 1
        enabled = saved is not None and saved.memory.enabled and reuse_prefix
        self.saved = saved if enabled else None
        # --privatecache: a slot's cache and saved states serve only their owner's requests.
        self._private = private

    @property
    def blocked(self) -> bool:
        """Prompts go in aligned blocks (see PROMPT_BLOCK): with more than one slot."""
        return len(self.slots) > 1

    def best_free(
        self, busy: set[Slot], prompt: list[int], owner: str = "", adapters: str = ""
    ) -> Slot | None:
        """The free slot whose cache shares the longest prefix with `prompt` (`owner`'s, made
        under the LoRA scales `adapters` names)."""
        owner = self._key(owner, adapters)
        free = [slot for slot in self.slots if slot not in busy]

        def reusable(slot: Slot) -> int:
            return common_prefix(slot.cached, prompt) if slot.owner == owner else 0

        return max(free, key=reusable) if free else None

    def prepare(
        self, slot: Slot, prompt: list[int], owner: str = "", reuse: bool = True, adapters: str = ""
    ) -> int:
        """Make the slot hold the longest reusable start of `prompt` it can (its own cache, or
        a saved state restored into it) for `owner` under the LoRA scales `adapters` names
        (server/core/llama/loading/lora.py's cache_key), nothing when not `reuse`; return how many
        tokens it holds."""
        owner = self._key(owner, adapters)
        self.latest = slot
        if slot.owner != owner:  # another's tokens: kept under their owner, never reused
            self._trim(slot, 0)
            slot.owner = owner
        keep = 0
        if self._reuse_prefix and reuse:
            self._restore_if_better(slot, prompt)
            keep = self._reusable(slot.cached, prompt)
            if self.context_shift:
                shifted = self._shift(slot, prompt, keep)
                if shifted is not None:
                    return shifted
        return self._trim(slot, keep)

    def _key(self, owner: str, adapters: str) -> str:
        """Whose cached tokens a request may reuse: with --privatecache only its owner's, and
        always only those computed under the same LoRA scales (the same tokens under other
        scales have other keys and values). States with an owner never reach the disk."""
        mine = owner if self._private else ""
        return f"{mine}|lora={adapters}" if adapters else mine

    def cut(self, slot: Slot, keep: int) -> int:
        """Keep only the first `keep` tokens the slot holds (a prefix that would end inside
        an image goes back to its start); returns how many it holds."""
        return self._trim(slot, min(keep, len(slot.cached)))

    def empty(self, slot: Slot) -> None:
        """Drop what the slot holds (kept in the prompt cache first, when worth it)."""
        self._trim(slot, 0)

    def hold(self, slot: Slot, tokens: list[int], owner: str = "") -> None:
        """Record that the slot's KV cache now holds `tokens` (a state restored into it)."""
        slot.cached = tokens
        slot.owner = owner if self._private else ""
        self.latest = slot

    def _reusable(self, cached: Sequence[int], prompt: list[int]) -> int:
        # Always re-decode the prompt's last token: its logits start the reply.
        return min(common_prefix(cached, prompt), len(prompt) - 1)

    def _trim(self, slot: Slot, keep: int) -> int:
        """Drop what the slot caches beyond `keep` tokens (saved first when it is much)."""
        if len(slot.cached) - keep >= _WORTH_SAVING:
            self._save(slot)
        if keep < len(slot.cached) and not llama.llama_memory_seq_rm(
            self._memory, slot.seq_id, keep, -1
        ):
            self.forget(slot)
            keep = 0
        del slot.cached[keep:]
        return keep

    def _restore_if_better(self, slot: Slot, prompt: list[int]) -> None:
        if self.saved is None:
            return
        state, _ = self.saved.best(prompt, slot.owner)
        if state is None:
            return
        gain = self._reusable(state.tokens, prompt) - self._reusable(slot.cached, prompt)
        if gain < _WORTH_SAVING:
            return
        leaving = self._copy_out(slot)  # what the slot holds may be someone's conversation too
        self.forget(slot)
        if llama.llama_state_seq_set_data(self._context, _bytes_of(state), state.size, slot.seq_id):
            slot.cached = list(state.tokens)
            self.saved.used(state, gain)
        else:
            # A state llama.cpp refuses (it found no room): read the prompt instead, and
            # never offer that state again.
            logger.warning("The prompt cache could not restore a saved state; reading the prompt")
            self.forget(slot)
            self.saved.discard(state)
        if leaving is not None:  # kept after the restored one became the most recent
            self.saved.keep(leaving)

    def _save(self, slot: Slot) -> None:
        """Keep the slot's KV state in the prompt cache (unless one there holds it already)."""
        state = self._copy_out(slot)
        if state is not None and self.saved is not None:
            self.saved.keep(state)

    def close(self) -> None:
        """Save what the slots hold (with --cachedir it reaches the disk: warm after a
        restart) and finish the writes under way. Before the context is freed."""
        if self.saved is not None:
            for slot in self.slots:
                self._save(slot)
            self.saved.close()

    def _copy_out(self, slot: Slot) -> SavedState | None:
        """The slot's KV state, when worth keeping and not already held by the cache."""
        saved = self.saved
        if (
            saved is None
            or len(slot.cached) < _WORTH_SAVING
            or saved.covers(slot.cached, slot.owner)
        ):
            return None
        size = llama.llama_state_seq_get_size(self._context, slot.seq_id)
        if not 0 < size <= saved.max_bytes:
            return None
        buffer = (ctypes.c_uint8 * size)()
        written = llama.llama_state_seq_get_data(self._context, buffer, size, slot.seq_id)
        return SavedState(tuple(slot.cached), buffer, written, slot.owner) if written else None

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
                length = common_prefix(cached[keep + offset :], prompt[keep:])
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


def _bytes_of(state: SavedState) -> Any:
    """A pointer to the state's bytes: its own ctypes array, or a buffer read from disk."""
    if isinstance(state.data, bytearray):
        return (ctypes.c_uint8 * state.size).from_buffer(state.data)
    return ctypes.cast(state.data, ctypes.POINTER(ctypes.c_uint8))


def disk_states(loaded: LoadedModel, settings: LoadSettings) -> DiskStates | None:
    """--cachedir's store for this model, or None. Its fingerprint names everything a saved
    state depends on: the model file's bytes, the llama.cpp build and the CPU features it
    uses, and the KV layout (context, slots, cache types, the full-size SWA cache)."""
    if not settings.cachedir or settings.cacheram_mib == 0 or settings.nofastforward:
        return None
    logger.info("Prompt cache on disk: %s (the model's digest is computed once)", settings.cachedir)
    fingerprint = "|".join(
        [
            f"model={file_sha256(loaded.path)}",
            f"llama_cpp={llama.__version__}",
            f"system={llama.llama_print_system_info().decode(errors='replace')}",
            kv_layout(loaded.n_ctx, settings),
        ]
    )
    folder = Path(settings.cachedir).expanduser()
    return DiskStates(folder, fingerprint, settings.cachedisk_mib * MIB)


def kv_layout(n_ctx: int, settings: LoadSettings) -> str:
    """The KV cache's layout as a saved state depends on it: context, slots, the cache types,
    flash attention, RoPE and metadata overrides (--quantkv, --ropeconfig, ...), the full-size
    SWA cache. A state saved under one layout is never restored under another."""
    slots = max(1, settings.parallelrequests)
    return f"n_ctx={n_ctx}|slots={slots}|{settings.options.fingerprint()}|swa_full=1"
