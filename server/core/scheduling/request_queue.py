"""The line of requests and its rules: KoboldCpp's places, a fair order, who an abort reaches.

`RequestQueue` is the scheduler's book: the jobs waiting (in the order they will be served) and
running, the finished ones a late `/api/extra/generate/check` may still ask about, and the
totals for perf and /metrics. Every field is guarded by its one condition lock, `lock`, which
the worker (server/core/scheduling/worker.py) also waits on for work. No thread and no engine here:
plain book-keeping, so each rule can be read in one place.

The fair order: waiting requests are served in turn across owners (`queue_owner`: an API key,
else a client address), so one client with ten requests queued does not make everyone else wait
behind all ten; one owner's own requests keep their arrival order. Each job gets a round when
admitted: one after its owner's previous request, and never before the round being served now
(an owner that already had its turn in the round being served waits for the next). The line
is sorted by (round, arrival), so KoboldCpp's first come, first served is what one user sees.
A request that leaves the line leaves the others' places as they were.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from server.base.defaults import DEFAULT_MULTIUSER
from server.core.scheduling.counters import ServerCounters
from server.core.scheduling.job import Job, JobState
from server.core.types import FinishReason, GenerationOutcome, GenerationRequest

_REMEMBERED_GENKEYS = 256  # finished jobs kept for late /check polls
# Labels of owners are keyed with a secret of this process: without it nobody can tell whose
# key or address a label stands for, not even by trying every address there is.
_LABEL_KEY = secrets.token_bytes(16)


def waiting_places(multiuser: int, parallel: int = 1) -> int:
    """How many requests may wait behind the running one(s) for a `--multiuser` value.

    KoboldCpp's table: 0 (or less) means no queue, 1 is the legacy "on" value meaning 10,
    N >= 2 allows N-1 to wait so that N are in flight. With parallel requests, 0 acts as 10.
    """
    if multiuser <= 0 and parallel > 1:
        multiuser = DEFAULT_MULTIUSER
    if multiuser <= 0:
        return 0
    if multiuser == 1:
        return DEFAULT_MULTIUSER - 1
    return multiuser - 1


def unbatchable_reason(request: GenerationRequest) -> str | None:
    """Why a request must run alone. KoboldCpp also runs grammar-bound requests alone; here
    each sequence has its own sampler chain (its grammar included) and a tool decision is a
    sequence of its own, so grammars, schemas and tool calls batch like any request."""
    if request.slot_action is not None:
        return "a slot action"  # a slot's state changes only while none generates
    if request.embed_inputs:
        return "embeddings"  # their own context, several inputs in one decode
    return None


def batchable(request: GenerationRequest) -> bool:
    return unbatchable_reason(request) is None


def owner_label(owner: str) -> str:
    """A short stand-in for an owner that perf may show: the same for one owner while the
    server runs, and never the key or address itself ("-" for requests of no owner)."""
    if not owner:
        return "-"
    return hmac.new(_LABEL_KEY, owner.encode(), hashlib.sha256).hexdigest()[:8]


class QueueFullError(Exception):
    """Raised by `submit` when no place is free; the API answers 503."""


class OwnerShareFullError(QueueFullError):
    """Raised by `submit` when the request's owner already has its share of the places in
    flight (`--multiuserperkey`), though the queue as a whole has room."""

    def __init__(self, share: int) -> None:
        super().__init__(share)
        self.share = share


@dataclass(frozen=True, slots=True)
class AbortResult:
    success: bool
    done: bool


@dataclass(frozen=True, slots=True)
class OwnerShare:
    """One owner's requests in flight, by its label."""

    label: str
    waiting: int
    running: int


@dataclass(frozen=True, slots=True)
class QueueLine:
    """The line as anyone may see it: labels and counts, never a key, address or request."""

    line: tuple[str, ...]  # each waiting request's owner label, the next one served first
    owners: tuple[OwnerShare, ...]  # in the order of their next turn, then those only running


@dataclass(slots=True)
class PerfCounters:
    """Figures of the last finished generation and totals, for /api/extra/perf."""

    last_outcome: GenerationOutcome | None = None
    total_gens: int = 0
    started_at: float = field(default_factory=time.monotonic)
    last_request_at: float = field(default_factory=time.monotonic)


class RequestQueue:
    """Waiting and running jobs, the finished ones remembered by genkey, and the totals.

    Methods named `*_locked` expect `lock` held; the others take it themselves.
    """

    def __init__(self, slots: int, max_waiting: int, owner_share: int = 0) -> None:
        self.slots = slots  # how many jobs may run at once (the engine's parallel slots)
        self.max_waiting = max_waiting
        self.owner_share = owner_share  # requests in flight one owner may have (0: no limit)
        self.lock = threading.Condition()
        self.waiting: list[Job] = []  # in the order they will be served: by `Job.turn`
        self._round = 0  # the round of the job that started last
        self._served_this_round: set[str] = set()  # owners who started a job in `_round`
        self._arrivals = 0
        self.running: list[Job] = []
        self.last_finished: Job | None = None
        self.perf = PerfCounters()
        self.counters = ServerCounters()
        self.stopping = False  # stop() was called: the worker ends
        self.closing = False  # shut_down() was called: admit nothing more
        self._finished_by_genkey: OrderedDict[str, Job] = OrderedDict()

    # -- admission and leaving (event-loop thread) -------------------------------------------

    def admit(self, job: Job) -> None:
        """Put a job in line at its owner's turn, or raise `QueueFullError` (the 503) when no
        place is free: `OwnerShareFullError` when its owner's share is what is full."""
        with self.lock:
            if self.closing:
                self.counters.busy_responses += 1
                raise QueueFullError
            self.perf.last_request_at = time.monotonic()
            refusal = self._refusal_locked(job.request.queue_owner)
            if refusal is not None:
                self.counters.busy_responses += 1
                raise refusal
            self._place_locked(job)
            self.lock.notify()

    def _refusal_locked(self, owner: str) -> QueueFullError | None:
        # Count in-flight requests, not the line alone: a job the worker has not picked up
        # yet is about to run, not waiting behind the running ones.
        if len(self.waiting) + len(self.running) >= self.slots + self.max_waiting:
            return QueueFullError()
        if self.owner_share > 0 and self._in_flight_locked(owner) >= self.owner_share:
            return OwnerShareFullError(self.owner_share)
        return None

    def _in_flight_locked(self, owner: str) -> int:
        return sum(1 for job in [*self.running, *self.waiting] if job.request.queue_owner == owner)

    def _place_locked(self, job: Job) -> None:
        """The job's turn: the round after its owner's newest waiting request; else the round
        being served, or the next one if the owner already started a request in it. Among
        equal rounds, arrival order."""
        owner = job.request.queue_owner
        own = [other.turn[0] for other in self.waiting if other.request.queue_owner == owner]
        round_ = max(own) + 1 if own else self._round + (owner in self._served_this_round)
        self._arrivals += 1
        job.turn = (round_, self._arrivals)
        bisect.insort(self.waiting, job, key=_turn_of)

    def take_out(self, job: Job) -> bool:
        """Take a waiting job out of the line (the others keep their places); False when it
        runs or is already done."""
        with self.lock:
            try:
                self.waiting.remove(job)
            except ValueError:
                return False
        return True

    def close(self) -> tuple[list[Job], list[Job]]:
        """Admit no more; the running jobs, and the waiting ones (now out of the line)."""
        with self.lock:
            self.closing = True
            running = list(self.running)
            waiting = list(self.waiting)
            self.waiting.clear()
        return running, waiting

    def stop(self) -> list[Job]:
        """Cancel the running jobs and wake the worker to end; the waiting ones, out of line."""
        with self.lock:
            self.stopping = True
            for job in self.running:
                job.cancelled.set()
            abandoned = list(self.waiting)
            self.waiting.clear()
            self.lock.notify_all()
        return abandoned

    def idle(self) -> bool:
        with self.lock:
            return not self.running and not self.waiting

    # -- who an abort reaches ----------------------------------------------------------------

    def abort_targets(self, genkey: str) -> list[Job]:
        """/api/extra/abort's jobs: with a genkey, only that user's request, running or
        waiting. Without one, KoboldCpp's rule: the running request(s) without a genkey, or
        every running request when nobody waits. Counted as aborts, and marked cancelled here,
        under the lock, so the worker sees all of one abort's jobs cancelled or none."""
        with self.lock:
            if genkey:
                open_jobs = [*self.running, *self.waiting]
                targets = [job for job in open_jobs if job.request.genkey == genkey][:1]
            else:
                targets = [j for j in self.running if not j.request.genkey or not self.waiting]
            self._mark_cancelled(targets)
        return targets

    def request_targets(self, request_id: str) -> list[Job]:
        """The admin's abort: every open job of one request (all of OpenAI's `n` choices)."""
        with self.lock:
            open_jobs = [*self.running, *self.waiting]
            targets = [job for job in open_jobs if job.request.request_id == request_id]
            self._mark_cancelled(targets)
        return targets

    def _mark_cancelled(self, targets: list[Job]) -> None:
        self.counters.aborts += len(targets)
        for job in targets:
            job.cancelled.set()

    def text_for(self, genkey: str) -> str:
        """/api/extra/generate/check: a user's own text so far; never someone else's.

        A waiting request shows empty text. Without a genkey only an anonymous generation
        (one that also had no genkey) is visible, so keyed users stay private.
        """
        with self.lock:
            if genkey:
                job = self._find_by_genkey_locked(genkey)
            else:
                anonymous = [j for j in self.running if not j.request.genkey]
                job = anonymous[0] if anonymous else None
                if job is None and not self.running:
                    job = self.last_finished
                if job is not None and job.request.genkey:
                    job = None
            if job is None or job.state is JobState.QUEUED:
                return ""
            return job.text

    # -- the worker's side -------------------------------------------------------------------

    def take_next_locked(self) -> Job:
        """The first waiting job (the next turn) starts running; its wait is measured."""
        job = self.waiting.pop(0)
        if job.turn[0] != self._round:  # the line is sorted: rounds only go up
            self._round = job.turn[0]
            self._served_this_round.clear()
        self._served_this_round.add(job.request.queue_owner)
        job.state = JobState.RUNNING
        job.started_at = time.monotonic()
        self.running.append(job)
        self.counters.queue_wait.observe(job.started_at - job.submitted_at)
        return job

    def record_finished(self, job: Job, outcome: GenerationOutcome, was_running: bool) -> None:
        """Book-keeping once a job is over: its outcome, perf's figures, the genkey memory."""
        with self.lock:
            if was_running:
                self.running.remove(job)
            job.state = JobState.DONE
            job.outcome = outcome
            ran = outcome.prompt_tokens > 0 or outcome.completion_tokens > 0
            if job.request.model_only or job.request.embed_inputs:
                pass  # a model load or unload, or embeddings: not a generation for perf
            elif ran or outcome.finish_reason is not FinishReason.CANCELLED:
                self.counters.record_outcome(outcome)
                self.perf.last_outcome = outcome
                self.perf.total_gens += 1
                self.last_finished = job
            key = job.request.genkey
            if key:
                self._finished_by_genkey[key] = job
                self._finished_by_genkey.move_to_end(key)
                while len(self._finished_by_genkey) > _REMEMBERED_GENKEYS:
                    self._finished_by_genkey.popitem(last=False)

    # -- counts and readings -----------------------------------------------------------------

    def count_disconnect(self) -> None:
        with self.lock:
            self.counters.disconnects += 1

    def count_admitted(self, source: str) -> None:
        with self.lock:
            self.counters.admitted(source)

    def running_and_waiting_locked(self) -> tuple[int, int]:
        """(running, waiting). A job the worker has not picked up yet counts as running if a
        slot is free for it (as in `admit`); none is while a job that must run alone
        (grammar, embeddings, a model switch) holds the engine."""
        running = len(self.running)
        alone = any(not batchable(job.request) or job.request.model_only for job in self.running)
        free = 0 if alone else self.slots - running
        joining = min(len(self.waiting), max(free, 0))
        return running + joining, len(self.waiting) - joining

    def line_locked(self) -> QueueLine:
        """Who waits, in turn order, and each owner's requests in flight, by label. Jobs
        about to join free slots count as running, as in `running_and_waiting_locked`."""
        waiting = self.running_and_waiting_locked()[1]
        starting = len(self.waiting) - waiting
        line = tuple(owner_label(job.request.queue_owner) for job in self.waiting[starting:])
        counts: dict[str, list[int]] = {label: [0, 0] for label in line}
        for label in line:
            counts[label][0] += 1
        for job in [*self.running, *self.waiting[:starting]]:
            counts.setdefault(owner_label(job.request.queue_owner), [0, 0])[1] += 1
        owners = tuple(OwnerShare(label, w, r) for label, (w, r) in counts.items())
        return QueueLine(line, owners)

    def _find_by_genkey_locked(self, genkey: str) -> Job | None:
        for job in [*self.running, *self.waiting]:
            if job.request.genkey == genkey:
                return job
        return self._finished_by_genkey.get(genkey)


def _turn_of(job: Job) -> tuple[int, int]:
    return job.turn
