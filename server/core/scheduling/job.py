"""A job: one admitted request as the event loop and the generation thread both see it."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from server.core.types import (
    EmbeddingsEvent,
    EngineReport,
    GenerationOutcome,
    GenerationRequest,
    Progress,
    TokenEvent,
)

logger = logging.getLogger(__name__)

# Unread events a stream may have before its client counts as gone. The socket's own buffers
# (hundreds of KB) fill first, so a client this far behind has stopped reading.
DEFAULT_MAX_PENDING_EVENTS = 4096


@dataclass(frozen=True, slots=True)
class LiveProgress:
    """A running job's progress as the live view shows it. Frozen and replaced whole by the
    worker thread, so the event loop reading it never sees half an update."""

    prompt_done: int = 0
    prompt_total: int = 0
    generated: int = 0
    generating_since: float | None = None  # time.monotonic() when the prompt was done
    generated_then: int = 0  # tokens already sampled by then (the prompt's last decode samples)
    last_token_at: float | None = None

    @property
    def generating(self) -> bool:
        return self.generating_since is not None

    def advanced(self, progress: Progress, now: float) -> LiveProgress:
        """This progress after the engine reported `progress` at `now`."""
        since, then = self.generating_since, self.generated_then
        if since is None and progress.prompt_done >= progress.prompt_total:
            since, then = now, progress.generated
        last = now if progress.generated != self.generated else self.last_token_at
        return LiveProgress(
            progress.prompt_done, progress.prompt_total, progress.generated, since, then, last
        )

    def tokens_per_second(self) -> float:
        """Tokens sampled since the prompt was done over the time they took (0 until two
        points exist): the speed a finished generation's figures would show."""
        if self.generating_since is None or self.last_token_at is None:
            return 0.0
        seconds = self.last_token_at - self.generating_since
        tokens = self.generated - self.generated_then
        return tokens / seconds if seconds > 0 and tokens > 0 else 0.0


class JobState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


@dataclass(eq=False, slots=True)
class Job:
    """One admitted request, as the API layer and the worker thread both see it.

    Events cross from the worker thread through `inbox` (a deque: appends are thread-safe).
    The event loop is woken only when it is not already due to look, so a burst of tokens
    costs one wake-up instead of one per token.
    """

    request: GenerationRequest
    loop: asyncio.AbstractEventLoop
    # The request's events, and its Progress reports while the prompt is read when it asked.
    inbox: deque[EngineReport] = field(default_factory=deque)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    wake_lock: threading.Lock = field(default_factory=threading.Lock)
    wake_pending: bool = False
    cancelled: threading.Event = field(default_factory=threading.Event)
    # Set on the event loop when the client stopped reading: its response must be dropped.
    abandoned: asyncio.Event = field(default_factory=asyncio.Event)
    max_pending: int = DEFAULT_MAX_PENDING_EVENTS
    stopped_by_shutdown: bool = False
    state: JobState = JobState.QUEUED
    text_parts: list[str] = field(default_factory=list)
    embeddings: EmbeddingsEvent | None = None  # what an embedding request produced
    outcome: GenerationOutcome | None = None
    submitted_at: float = field(default_factory=time.monotonic)  # admitted (time.monotonic)
    # Its place in the fair order, (round, arrival number), given when admitted: the line is
    # sorted by it (server/core/scheduling/request_queue.py).
    turn: tuple[int, int] = (0, 0)
    started_at: float | None = None  # taken from the line by the worker; None while waiting
    progress: LiveProgress = field(default_factory=LiveProgress)  # written by the worker only
    # The prompt tokens the consumer was last told were read (-1: not told yet); worker only.
    prompt_reported: int = -1

    @property
    def text(self) -> str:
        """Everything generated so far (what /api/extra/generate/check shows)."""
        return "".join(self.text_parts)

    def report_progress(self, progress: Progress) -> None:
        """From the worker thread: hand a progress report over to a consumer that asked for
        them (`report_progress`), only while the prompt is read: the first (what came from
        the cache), then each that read more, up to the one that finished the prompt."""
        if not self.request.report_progress:
            return
        done, reported = progress.prompt_done, self.prompt_reported
        if reported >= progress.prompt_total or done <= reported:
            return
        self.prompt_reported = done
        self.deliver(progress)

    def deliver(self, event: EngineReport) -> None:
        """From the worker thread: hand the event over and wake the loop if it is not due."""
        if isinstance(event, TokenEvent) and len(self.inbox) >= self.max_pending:
            # The client stopped reading: stop generating for it and drop its stream, so it
            # can neither hold a slot nor grow this buffer without bound.
            if not self.cancelled.is_set():
                self.cancelled.set()
                logger.warning(
                    "[%s] dropped: the client stopped reading (%d events unread)",
                    self.request.request_id,
                    len(self.inbox),
                )
                with contextlib.suppress(RuntimeError):
                    self.loop.call_soon_threadsafe(self.abandoned.set)
            return
        self.inbox.append(event)
        with self.wake_lock:
            if self.wake_pending:
                return  # the loop is already due to drain the inbox
            self.wake_pending = True
        # The loop may already be closed at shutdown; then nobody is listening anyway.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(_wake, self)


def _wake(job: Job) -> None:
    """On the event loop: let the job's consumer drain its inbox."""
    with job.wake_lock:
        job.wake_pending = False
    job.arrived.set()
