"""Telling a reply that loops: one short span written again and again.

A small model bound by a grammar to a tool call can fall into a loop the grammar allows
forever (seen on SmolLM2: a date's `-10-22-12:45:00` repeated for 657 tokens inside a string
argument, until max_tokens). With GenerationRequest.cut_loops the engine ends such a reply at
this bound, with finish_reason LENGTH and `looped` set, instead of spending the whole budget.
"""

from __future__ import annotations

# A span of 1..LOOP_SPAN characters repeated LOOP_REPEATS times in a row, covering at least
# LOOP_CHARS characters (a short span needs more repeats: "0, 0, 0" is not yet a loop).
LOOP_SPAN = 64
LOOP_REPEATS = 8
LOOP_CHARS = 96
WATCHED_CHARS = LOOP_SPAN * LOOP_REPEATS  # the most of a reply's end a loop can need


def ends_in_loop(text: str) -> bool:
    """Whether `text` ends with a span repeated as the bound says."""
    for span in range(1, LOOP_SPAN + 1):
        repeats = max(LOOP_REPEATS, -(-LOOP_CHARS // span))
        run = span * repeats
        if len(text) >= run and text[-run:] == text[-span:] * repeats:
            return True
    return False


class LoopWatch:
    """A reply's end as it is generated, and whether it has begun to loop."""

    def __init__(self) -> None:
        self._tail = ""

    def looping_after(self, text: str) -> bool:
        """Add the reply's next text; True once its end loops."""
        if not text:
            return False
        self._tail = (self._tail + text)[-WATCHED_CHARS:]
        return ends_in_loop(self._tail)
