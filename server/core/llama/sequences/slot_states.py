"""A slot's KV state copied out whole and put back on request: llama-server's slot files
(`POST /slots/{id}?action=save|restore|erase`, under --slot-save-path) and KoboldCpp's admin
save states (`/api/admin/save_state` and friends, kept in memory).

Unlike the prompt cache (server/core/caching/prompt_cache.py), which decides by itself what to keep,
these are the client's: a file is written where the API was told, a save state stays until it
is replaced or cleared. The file checks (a name inside the folder, never over a file that is
not a slot file) are the API's (server/dialects/llama/slot_routes.py); here the file is llama.cpp's
own sequence-state format, written to a temporary name first and moved into place, so a crash
or a full disk never leaves half a file under the name asked for.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path
from typing import Any

import llama_cpp as llama

from server.core.caching.prompt_cache import SavedState
from server.core.llama.sequences.slots import Slot, SlotCache
from server.core.scheduling.engine import SlotActionError
from server.core.types import SlotAction, SlotActionEvent, SlotActionKind

# KoboldCpp's save states: 5 unless its SmartCache slot count says more (`savestate_limit`).
KOBOLD_STATE_SLOTS = 5


def kobold_state_slots(smartcache: int) -> int:
    return smartcache if smartcache > 1 else KOBOLD_STATE_SLOTS


class SlotStates:
    """The slot actions of one context (worker thread only, like every engine call)."""

    def __init__(
        self, slots: SlotCache, context: Any, n_vocab: int, slot_context: int, memory_slots: int
    ) -> None:
        self._slots = slots
        self._context = context
        self._n_vocab = n_vocab
        self._slot_context = slot_context
        self._memory: list[SavedState | None] = [None] * memory_slots

    def run(self, action: SlotAction, owner: str) -> SlotActionEvent:
        """Do `action`; raise SlotActionError saying why it could not be done."""
        started = time.perf_counter()
        kind, slot = action.kind, self._slot(action)
        if kind is SlotActionKind.CHECK:
            tokens, size = len(slot.cached), self._state_size(slot)
            return SlotActionEvent(tokens, size, states=self.memory_states())
        if kind is SlotActionKind.ERASE:
            tokens = self._erase(action, slot)
            return SlotActionEvent(tokens, seconds=time.perf_counter() - started)
        if action.memory_slot is not None:
            index = self._memory_index(action.memory_slot)
            if kind is SlotActionKind.SAVE:
                tokens, size = self._save_memory(slot, index)
            else:
                tokens, size = self._restore_memory(slot, index, owner)
        elif action.path is not None:
            path = Path(action.path)
            if kind is SlotActionKind.SAVE:
                tokens, size = self._save_file(slot, path)
            else:
                tokens, size = self._restore_file(slot, path, owner)
        else:
            raise SlotActionError("a slot action needs a file or a save state")
        return SlotActionEvent(tokens, size, time.perf_counter() - started)

    def memory_states(self) -> tuple[tuple[int, int], ...]:
        """Each save state's (tokens, bytes); (0, 0) for an empty one."""
        return tuple((len(s.tokens), s.size) if s else (0, 0) for s in self._memory)

    # -- which slot ------------------------------------------------------------------------

    def _slot(self, action: SlotAction) -> Slot:
        """The slot named; KoboldCpp's states work on the slot used last (its one context)."""
        slots = self._slots.slots
        if action.memory_slot is not None:
            return self._slots.latest
        if not 0 <= action.slot < len(slots):
            raise SlotActionError("Invalid slot ID", client_error=True)
        return slots[action.slot]

    def _memory_index(self, number: int) -> int:
        if not 0 <= number < len(self._memory):
            raise SlotActionError(
                f"save state {number} does not exist: there are {len(self._memory)} "
                f"(0 to {len(self._memory) - 1})",
                client_error=True,
            )
        return number

    # -- files -----------------------------------------------------------------------------

    def _save_file(self, slot: Slot, path: Path) -> tuple[int, int]:
        tokens = (llama.llama_token * max(1, len(slot.cached)))(*slot.cached)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            written = llama.llama_state_seq_save_file(
                self._context, os.fsencode(partial), slot.seq_id, tokens, len(slot.cached)
            )
            if not written:
                raise SlotActionError("Unable to save slot")
            os.replace(partial, path)  # whole or not at all under the name asked for
        finally:
            partial.unlink(missing_ok=True)
        return len(slot.cached), int(written)

    def _restore_file(self, slot: Slot, path: Path, owner: str) -> tuple[int, int]:
        name = os.fsencode(path)
        count = ctypes.c_size_t(0)
        # Without a token buffer llama.cpp reads the token count only: a state too long for
        # a slot is refused before anything is loaded.
        if not llama.llama_state_seq_load_file(
            self._context, name, slot.seq_id, None, 0, ctypes.byref(count)
        ):
            raise SlotActionError(_UNREADABLE, client_error=True)
        if count.value > self._slot_context:
            raise SlotActionError(
                f"Unable to restore slot: the saved prompt holds {count.value} tokens, "
                f"a slot {self._slot_context}",
                client_error=True,
            )
        self._slots.empty(slot)
        tokens = (llama.llama_token * max(1, count.value))()
        read = llama.llama_state_seq_load_file(
            self._context, name, slot.seq_id, tokens, count.value, ctypes.byref(count)
        )
        return self._restored(slot, list(tokens[: count.value]), int(read), owner)

    # -- KoboldCpp's save states -------------------------------------------------------------

    def _save_memory(self, slot: Slot, index: int) -> tuple[int, int]:
        size = self._state_size(slot)
        buffer = (ctypes.c_uint8 * max(1, size))()
        written = llama.llama_state_seq_get_data(self._context, buffer, size, slot.seq_id)
        if size and not written:
            raise SlotActionError("Unable to save the state")
        self._memory[index] = SavedState(tuple(slot.cached), buffer, int(written))
        return len(slot.cached), int(written)

    def _restore_memory(self, slot: Slot, index: int, owner: str) -> tuple[int, int]:
        state = self._memory[index]
        if state is None:
            raise SlotActionError(f"save state {index} is empty", client_error=True)
        self._slots.empty(slot)
        read = llama.llama_state_seq_set_data(self._context, state.data, state.size, slot.seq_id)
        return self._restored(slot, list(state.tokens), int(read), owner)

    def _erase(self, action: SlotAction, slot: Slot) -> int:
        number = action.memory_slot
        if number is None:
            erased = len(slot.cached)
            self._slots.forget(slot)  # asked to be gone: not kept in the prompt cache either
            return erased
        if number == -1:
            erased = sum(len(s.tokens) for s in self._memory if s)
            self._memory = [None] * len(self._memory)
            return erased
        index = self._memory_index(number)
        state, self._memory[index] = self._memory[index], None
        return len(state.tokens) if state else 0

    # -- both --------------------------------------------------------------------------------

    def _restored(self, slot: Slot, tokens: list[int], read: int, owner: str) -> tuple[int, int]:
        """Take a restore that llama.cpp reported, or leave the slot empty and say why: a
        state it refused (no room, another model's shapes) or tokens this model does not
        have (another model's file) would give wrong answers."""
        if not read and tokens:
            self._slots.forget(slot)
            raise SlotActionError(_UNREADABLE, client_error=True)
        if any(not 0 <= token < self._n_vocab for token in tokens):
            self._slots.forget(slot)
            raise SlotActionError(
                "Unable to restore slot: the file holds tokens this model does not have",
                client_error=True,
            )
        self._slots.hold(slot, tokens, owner)
        return len(tokens), read

    def _state_size(self, slot: Slot) -> int:
        return int(llama.llama_state_seq_get_size(self._context, slot.seq_id)) if slot.cached else 0


_UNREADABLE = "Unable to restore slot: no available space in KV cache or invalid slot save file"
