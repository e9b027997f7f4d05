"""Where a slot's saved states live: in memory (`PromptCache`) and, with `--cachedir`, also on
disk (`DiskStates`), so a conversation is warm again after a restart, a model switch or a crash.

Every state kept in memory is also written to disk, by one writer thread (the worker that
decodes never waits on a disk), unless it is private (`--privatecache`: such states never leave
the process). A prompt is matched against both; a disk state wins only when it spares more
tokens than the best one in memory, and is then read (checked by its checksum), held in memory
too, and handed to the slot to restore. Plain Python: the states are opaque buffers here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from server.core.caching.prompt_cache import PromptCache, SavedState
from server.core.caching.prompt_disk import DiskStates, DiskStats

logger = logging.getLogger(__name__)


class StateStore:
    def __init__(self, memory: PromptCache, disk: DiskStates | None = None) -> None:
        self.memory = memory
        self.disk = disk
        self._writer = ThreadPoolExecutor(1, "hearth-cache-writer") if disk is not None else None

    @property
    def max_bytes(self) -> int:
        """The largest state worth copying out: one that fits the memory bound."""
        return self.memory.max_bytes

    def disk_stats(self) -> DiskStats | None:
        return None if self.disk is None else self.disk.stats()

    def best(self, prompt: Sequence[int], owner: str = "") -> tuple[SavedState | None, int]:
        """The state sharing the longest token prefix with `prompt` (`owner`'s), from memory
        or, when longer, from disk (read and verified now); and that length."""
        state, length = self.memory.best(prompt, owner)
        if self.disk is None or owner:
            return state, length
        entry, on_disk = self.disk.best(prompt)
        if entry is None or on_disk <= length:
            return state, length
        data = self.disk.read(entry)  # None: damaged, already removed with a warning
        if data is None:
            return state, length
        loaded = SavedState(entry.tokens, bytearray(data), len(data))
        self.memory.put(loaded)
        return loaded, on_disk

    def covers(self, tokens: Sequence[int], owner: str = "") -> bool:
        return self.memory.covers(tokens, owner)

    def keep(self, state: SavedState) -> None:
        """Hold `state` in memory and, unless private, write it to disk in the background."""
        self.memory.put(state)
        if self._writer is not None and self.disk is not None and not state.owner:
            view = memoryview(state.data).cast("B")[: state.size]
            future = self._writer.submit(self.disk.write, state.tokens, view)
            future.add_done_callback(_log_failure)

    def used(self, state: SavedState, tokens: int) -> None:
        self.memory.used(state, tokens)

    def discard(self, state: SavedState) -> None:
        self.memory.discard(state)

    def close(self) -> None:
        """Finish the writes under way (a clean stop loses nothing), then drop the states."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
        self.memory.clear()


def _log_failure(future: Future[bool]) -> None:
    error = future.exception()
    if error is not None:  # DiskStates never raises for disk errors: this is a bug
        logger.error("The prompt cache's disk writer failed: %r", error)
