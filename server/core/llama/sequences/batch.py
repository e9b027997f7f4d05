"""The llama_batch of one decode: each generating sequence's next token, then prompt chunks."""

from __future__ import annotations

from collections.abc import Sequence as Seq

import llama_cpp as llama

from server.core.llama.sequences.sequence import Sequence
from server.core.llama.sequences.slots import PROMPT_BLOCK

Added = list[tuple[Sequence, list[int]]]


def block_size(batch_size: int) -> int:
    """The aligned prompt block for a batch of `batch_size` rows: PROMPT_BLOCK, or in a small
    batch the largest power of two that fits in half of it, so a block always has room beside
    the generating sequences' tokens (a block larger than the room would wait forever)."""
    if batch_size >= 2 * PROMPT_BLOCK:
        return PROMPT_BLOCK
    return 1 << max(0, (batch_size // 2).bit_length() - 1)


class Batch:
    """One reusable llama_batch of `size` rows; `blocked`: prompts go in aligned blocks."""

    def __init__(self, size: int, *, blocked: bool) -> None:
        self.size = size
        self.batch = llama.llama_batch_init(size, 0, 1)
        self._blocked = blocked
        self._block = block_size(size)

    def free(self) -> None:
        llama.llama_batch_free(self.batch)

    def fill(self, active: Seq[Sequence], slot_context: int) -> tuple[Added, int]:
        """Put each generating sequence's next token (and its draft, every row with logits)
        in the batch, then prompt chunks in the room left. Returns what each sequence added
        and the rows used."""
        room = self.size // 2  # drafts leave prompts at least half of the batch
        for sequence in active:
            room -= sequence.plan_draft(room, slot_context)
        added: Added = []
        used = 0
        for sequence in active:
            if sequence.next_token is None:
                continue
            if used + 1 + len(sequence.draft) > self.size:
                sequence.draft = []  # no room for it in this decode
            if used >= self.size:
                continue
            tokens = [sequence.next_token, *sequence.draft]
            position = len(sequence.slot.cached)
            for offset, token in enumerate(tokens):
                self._put(used + offset, token, position + offset, sequence, True)
            sequence.logits_row = used
            added.append((sequence, tokens))
            used += len(tokens)
        for sequence in active:
            chunk = self._prompt_chunk(sequence, self.size - used)
            if not chunk:
                continue
            completes = sequence.decoded + len(chunk) == len(sequence.prompt)
            for offset, token in enumerate(chunk):
                last = completes and offset == len(chunk) - 1
                self._put(used, token, sequence.decoded + offset, sequence, last)
                if last:
                    sequence.logits_row = used
                used += 1
            sequence.decoded += len(chunk)
            added.append((sequence, chunk))
        self.batch.n_tokens = used
        return added, used

    def _prompt_chunk(self, sequence: Sequence, room: int) -> list[int]:
        """The part of a waiting prompt to decode now, in at most `room` rows."""
        if sequence.next_token is not None or room <= 0:
            return []
        start = sequence.decoded
        # A media item is decoded on its own (engine.py, companions.read_media): text stops
        # where the next one starts.
        stop = len(sequence.prompt) if sequence.media is None else sequence.media.next_start(start)
        end = min(start + room, stop)
        if self._blocked and sequence.reused == 0:
            # One aligned block per sequence per decode (see PROMPT_BLOCK); a block that does
            # not fit waits for the next step rather than being cut differently. A prompt read
            # on top of a cached prefix is cut differently anyway: its rest goes in as few
            # decodes as the room allows (a returning user's new line in one).
            block = self._block
            end = min((start // block + 1) * block, stop)
            if end - start > room:
                return []
        return sequence.prompt[start:end]

    def _put(self, row: int, token: int, position: int, sequence: Sequence, logits: bool) -> None:
        batch = self.batch
        batch.token[row] = token
        batch.pos[row] = position
        batch.n_seq_id[row] = 1
        batch.seq_id[row][0] = sequence.slot.seq_id
        batch.logits[row] = logits
