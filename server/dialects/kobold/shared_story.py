"""KoboldCpp's `--multiplayer`: one story that several KoboldAI Lite pages write together.

The server keeps the latest story as the page sent it (Lite's compressed save text, opaque
here), the format the page named, and a turn counter: `turn_major` goes up (and `turn_minor`
back to 1) when a page replaces the whole story (`full_update`), `turn_minor` goes up for any
other change. Pages poll the counter (`/api/extra/multiplayer/status`) and fetch the story
when it moved. `idle` tells a page whether it may write now: no generation running or
waiting, and no other player active in the last IDLE_SECONDS (a page says it is busy with
`senderbusy`, and every write counts as activity). These are KoboldCpp's rules and numbers.

KoboldCpp takes every write, so two pages writing at once lose one of the writes silently.
Hearth keeps that for Lite, which sends no turn, and adds a conflict rule for clients that
do: a write naming the turn its story was based on (`turn_major`, `turn_minor`, as status or
getstory said them) is refused once the story has moved on (`StaleStory`).

Plain Python with a lock: the routes (server/dialects/kobold/lite.py) call it from the event
loop, and nothing here waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

IDLE_SECONDS = 6.0  # KoboldCpp's: a player active this recently keeps the others waiting
MAX_STORY_CHARS = 3 * 1024 * 1024  # KoboldCpp's bound on one story
MAX_SENDER_CHARS = 256
MAX_SENDERS = 1024  # players remembered at once; the longest idle are forgotten first
_FORGET_SECONDS = 600.0  # a player quiet this long is forgotten


class StoryRefused(Exception):
    """A write the story does not take; the message is KoboldCpp's error text."""


class StaleStory(StoryRefused):
    """A write based on a turn the story has since left."""


@dataclass(frozen=True, slots=True)
class Turn:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True, slots=True)
class StoryState:
    """What status answers: the turn, whether the asker may write now, the story's format."""

    turn: Turn
    idle: bool
    data_format: str


class SharedStory:
    """The one shared story of a server. Each call says whether a generation is running or
    waiting (`generating`, the scheduler's word); `clock` is replaceable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._story: str | None = None
        self._format = ""
        self._turn = Turn(1, 1)
        self._active: dict[str, float] = {}  # sender → when it was last active

    def status(
        self, sender: str = "", *, sender_busy: bool = False, generating: bool = False
    ) -> StoryState:
        sender = sender[:MAX_SENDER_CHARS]
        with self._lock:
            if sender and sender_busy:
                self._saw(sender)
            return self._state(sender, generating)

    def story(self) -> tuple[str, Turn]:
        """The story as last written ("" before any write) and its turn, read together."""
        with self._lock:
            return self._story or "", self._turn

    def write(
        self,
        data: str,
        *,
        data_format: str = "",
        sender: str = "",
        full_update: bool = False,
        based_on: Turn | None = None,
        generating: bool = False,
    ) -> StoryState:
        """Take a new story; StoryRefused (StaleStory when `based_on` is not the turn now)."""
        if not data:
            raise StoryRefused("No story submitted!")
        if len(data) > MAX_STORY_CHARS:
            raise StoryRefused(f"Story is too long! (at most {MAX_STORY_CHARS:,} characters)")
        sender = sender[:MAX_SENDER_CHARS]
        with self._lock:
            if based_on is not None and based_on != self._turn:
                raise StaleStory(
                    f"The story changed since turn {based_on} (it is at turn {self._turn} "
                    "now): fetch it again, then write."
                )
            self._story, self._format = data, data_format
            if sender:
                self._saw(sender)
            major, minor = self._turn.major, self._turn.minor
            self._turn = Turn(major + 1, 1) if full_update else Turn(major, minor + 1)
            return self._state(sender, generating)

    def _state(self, sender: str, generating: bool) -> StoryState:
        return StoryState(self._turn, not generating and self._alone(sender), self._format)

    def _alone(self, sender: str) -> bool:
        """No other player was active in the last IDLE_SECONDS."""
        now = self._clock()
        return not any(
            other != sender and now - seen < IDLE_SECONDS for other, seen in self._active.items()
        )

    def _saw(self, sender: str) -> None:
        now = self._clock()
        self._active.pop(sender, None)  # re-inserted last: the newest
        self._active[sender] = now
        for other, seen in list(self._active.items()):
            if now - seen > _FORGET_SECONDS or len(self._active) > MAX_SENDERS:
                del self._active[other]
            else:
                break  # in order of activity: the rest are newer
