"""Running totals for `/metrics`: plain numbers the scheduler keeps while it works.

The core knows nothing of Prometheus: `server/dialects/routes/metrics.py` reads a copy of these
(`Scheduler.take_metrics`) and renders them with prometheus-client. The totals follow
llama-server's own bookkeeping (tools/server/server-common.h `server_metrics`), so its metric
names can mean the same thing here: prompt tokens count only those actually decoded (cached
ones are counted apart), and throughput is over decode steps, since a request's first
generated token comes from its prompt's last decode and costs no step of its own.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field

from server.core.types import GenerationOutcome

# Upper bounds (seconds) of the queue-wait histogram's buckets: from an idle server's
# milliseconds to the minutes a request may wait behind long generations.
QUEUE_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass(slots=True)
class Throughput:
    """Tokens, the decode steps they took, and the seconds those took."""

    tokens: int = 0
    steps: int = 0
    seconds: float = 0.0

    def add(self, tokens: int, steps: int, seconds: float) -> None:
        self.tokens += tokens
        self.steps += steps
        self.seconds += max(seconds, 0.0)

    def per_second(self) -> float:
        """Steps per second (llama-server's rate: tokens that cost no step do not count)."""
        return self.steps / self.seconds if self.seconds > 0 else 0.0


@dataclass(slots=True)
class WaitHistogram:
    """How long requests waited between admission and start, in QUEUE_WAIT_BUCKETS."""

    bounds: tuple[float, ...] = QUEUE_WAIT_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(QUEUE_WAIT_BUCKETS) + 1))
    total_seconds: float = 0.0
    observations: int = 0

    def observe(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        # A bucket holds values up to and including its bound (Prometheus's `le`).
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.total_seconds += seconds
        self.observations += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it) per bucket, ending with +inf."""
        running, buckets = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            buckets.append((bound, running))
        return buckets


@dataclass(slots=True)
class DecodeCounts:
    """llama_decode calls and the busy slots summed over them (llama-server's n_decode and
    n_busy_slots), kept by an engine that decodes."""

    calls: int = 0
    busy_slots: int = 0

    def record(self, busy_slots: int) -> None:
        self.calls += 1
        self.busy_slots += busy_slots

    def plus(self, other: DecodeCounts) -> DecodeCounts:
        return DecodeCounts(self.calls + other.calls, self.busy_slots + other.busy_slots)


@dataclass(slots=True)
class ServerCounters:
    """Totals since the server started, plus llama-server's throughput window (the figures
    since the last scrape, restarted by each one). The scheduler updates them under its lock."""

    prompt: Throughput = field(default_factory=Throughput)  # decoded prompt tokens only
    prompt_cached_tokens: int = 0  # prompt tokens reused from the KV cache
    predicted: Throughput = field(default_factory=Throughput)
    prompt_window: Throughput = field(default_factory=Throughput)
    predicted_window: Throughput = field(default_factory=Throughput)
    longest_sequence: int = 0  # prompt + generated tokens of the longest request
    busy_responses: int = 0  # refused with the 503 busy body: no queue place (or shutting down)
    aborts: int = 0  # requests stopped by /api/extra/abort
    disconnects: int = 0  # requests whose client left before their end
    queue_wait: WaitHistogram = field(default_factory=WaitHistogram)
    requests_by_dialect: dict[str, int] = field(default_factory=dict)  # admitted requests
    # Speculative decoding: draft tokens decoded, those accepted, and the decodes that
    # checked drafts (llama-server's n_draft_tokens, n_draft_accepted, n_draft_verif_steps).
    draft_tokens: int = 0
    draft_accepted: int = 0
    draft_steps: int = 0

    def record_outcome(self, outcome: GenerationOutcome) -> None:
        """Add a finished generation's figures (a request that never ran adds zeros)."""
        cached = min(outcome.reused_prompt_tokens, outcome.prompt_tokens)
        decoded = outcome.prompt_tokens - cached
        self.prompt_cached_tokens += cached
        for prompt in (self.prompt, self.prompt_window):
            prompt.add(decoded, decoded, outcome.prompt_seconds if decoded else 0.0)
        steps = max(outcome.completion_tokens - 1, 0)  # the first token came with the prompt
        for predicted in (self.predicted, self.predicted_window):
            predicted.add(outcome.completion_tokens, steps, outcome.generation_seconds)
        self.longest_sequence = max(
            self.longest_sequence, outcome.prompt_tokens + outcome.completion_tokens
        )
        self.draft_tokens += outcome.draft_tokens
        self.draft_accepted += outcome.draft_accepted
        self.draft_steps += outcome.draft_steps

    def admitted(self, dialect: str) -> None:
        self.requests_by_dialect[dialect] = self.requests_by_dialect.get(dialect, 0) + 1

    def copy(self) -> ServerCounters:
        """A copy sharing nothing mutable, to render outside the scheduler's lock."""
        return dataclasses.replace(
            self,
            prompt=dataclasses.replace(self.prompt),
            predicted=dataclasses.replace(self.predicted),
            prompt_window=dataclasses.replace(self.prompt_window),
            predicted_window=dataclasses.replace(self.predicted_window),
            queue_wait=dataclasses.replace(self.queue_wait, counts=list(self.queue_wait.counts)),
            requests_by_dialect=dict(self.requests_by_dialect),
        )

    def restart_window(self) -> None:
        self.prompt_window = Throughput()
        self.predicted_window = Throughput()
