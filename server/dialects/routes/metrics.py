"""`GET /metrics`: Prometheus text, with llama-server's metric names and Hearth's own.

The only module that imports prometheus-client. The numbers come from the scheduler
(`Scheduler.take_metrics`, plain counters in server/core/scheduling/counters.py); a custom collector
renders them at each scrape into a registry of the app's own (`metrics_registry`, built by
the app factory, never the library's global one), so two apps in one process never share.
Without `--metrics` the route answers as llama-server's does: 501 `not_supported_error`.

llama-server's set (tools/server/server-task.cpp `to_metrics`), same names, types and
meaning, except:
- `llamacpp:n_tokens_max` is a gauge here, where llama-server calls it a counter: the
  Prometheus text format (and prometheus-client) writes a counter's sample as NAME_total,
  which would change the name; a largest-seen value is a gauge in Prometheus's terms anyway.
- The `spec_decode_*` counters count only finished requests (as llama-server, which adds a
  request's figures when it ends); the per-position acceptance counter is not kept.
- `prompt_seconds_total` includes sampling a request's first token (Hearth times the prompt
  up to its first token).

Hearth's own, with the `hearth_` prefix: busy (503) responses, aborts, disconnects,
admitted requests per dialect, the queue wait as a histogram, requests by API key (by its
name, never the key) and refused for a missing or wrong key, and, when the engine keeps
processed prompts, the prompt cache (states saved, restored, the tokens restores saved,
evictions; the states and bytes held now and the bound).
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from server.core.caching.prompt_cache import PromptCacheStats
from server.core.scheduling.counters import DecodeCounts
from server.core.scheduling.scheduler import MetricsReading, Scheduler
from server.dialects.edge.api_keys import KeyRing
from server.dialects.edge.deps import key_required
from server.dialects.edge.errors import APIError, Dialect

METRICS_OFF_MESSAGE = (
    "Metrics are off: start Hearth with --metrics (or tick Prometheus Metrics on the "
    "launcher's Network tab) to serve /metrics."
)
# Without --metrics: llama-server's 501 and error type, its clients (and its own tests) tell
# "off here" by them. Not a failure of the server: the request is fine, the feature is off.
METRICS_OFF_STATUS = 501

# The classic text format, as llama-server labels it: every name here is valid in it, so
# nothing needs the escaping that prometheus-client's newer default (version 1.0.0) announces.
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"

router = APIRouter(tags=["llama-server"])


class SchedulerCollector(Collector):
    """Renders one scheduler's totals at each scrape (a custom collector, so the names come
    out exactly as llama-server writes them: `llamacpp:` and all)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def collect(self) -> Iterator[Metric]:
        reading = self._scheduler.take_metrics()
        yield from _llama_server_counters(reading)
        yield from _llama_server_gauges(reading)
        yield from _hearth_metrics(reading)
        if reading.prompt_cache is not None:
            yield from _prompt_cache_metrics(reading.prompt_cache)


class KeyRingCollector(Collector):
    """Requests by API key, labelled with each key's name (never the key), and the requests
    refused for a missing or wrong key; nothing when the server needs no key."""

    def __init__(self, ring: KeyRing) -> None:
        self._ring = ring

    def collect(self) -> Iterator[Metric]:
        ring = self._ring
        if not ring.required:
            return
        let_in = CounterMetricFamily(
            "hearth_key_requests_total",
            "Requests let in by each API key, by the key's name",
            labels=["key"],
        )
        # Every name in use now (0 until used), and those a reload removed, with their counts.
        counts = {name: 0 for name in ring.names()} | dict(ring.accepted)
        for name, count in sorted(counts.items()):
            let_in.add_metric([name], count)
        yield let_in
        refused = CounterMetricFamily(
            "hearth_key_refusals_total",
            "Requests refused because they carried no API key (missing) or none of the keys "
            "(wrong)",
            labels=["reason"],
        )
        for reason in ("missing", "wrong"):
            refused.add_metric([reason], ring.refused[reason])
        yield refused


def metrics_registry(scheduler: Scheduler, ring: KeyRing | None = None) -> CollectorRegistry:
    """A registry of the app's own serving `scheduler`'s metrics, and its API keys'."""
    registry = CollectorRegistry(auto_describe=False)  # never scrape at registration
    registry.register(SchedulerCollector(scheduler))
    if ring is not None:
        registry.register(KeyRingCollector(ring))
    return registry


def _counter(name: str, help_text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"llamacpp:{name}", help_text, value=value)


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"llamacpp:{name}", help_text, value=value)


def _llama_server_counters(reading: MetricsReading) -> Iterator[Metric]:
    counters = reading.counters
    decodes = reading.decodes or DecodeCounts()
    yield _counter(
        "prompt_tokens_total",
        "Number of prompt tokens processed, excluding cached tokens",
        counters.prompt.tokens,
    )
    yield _counter(
        "prompt_tokens_cached_total",
        "Number of prompt tokens reused from the cache",
        counters.prompt_cached_tokens,
    )
    yield _counter(
        "prompt_seconds_total", "Total time spent processing prompts", counters.prompt.seconds
    )
    yield _counter(
        "tokens_predicted_total",
        "Number of generation tokens processed",
        counters.predicted.tokens,
    )
    yield _counter(
        "tokens_predicted_seconds_total",
        "Total time spent generating tokens",
        counters.predicted.seconds,
    )
    yield _counter("n_decode_total", "Total number of llama_decode() calls", decodes.calls)
    yield _counter(
        "spec_decode_num_draft_tokens_total",
        "Speculative: Total draft tokens generated",
        counters.draft_tokens,
    )
    yield _counter(
        "spec_decode_num_accepted_tokens_total",
        "Speculative: Total draft tokens accepted by the target model",
        counters.draft_accepted,
    )
    yield _counter(
        "spec_decode_num_drafts_total",
        "Speculative: Total speculative decoding verification steps",
        counters.draft_steps,
    )


def _llama_server_gauges(reading: MetricsReading) -> Iterator[Metric]:
    counters = reading.counters
    decodes = reading.decodes or DecodeCounts()
    yield _gauge(
        "n_tokens_max",
        "Largest observed sequence length (prompt + generation)",
        counters.longest_sequence,
    )
    yield _gauge(
        "prompt_tokens_seconds",
        "Average prompt throughput in tokens/s",
        counters.prompt_window.per_second(),
    )
    yield _gauge(
        "predicted_tokens_seconds",
        "Average generation throughput in tokens/s",
        counters.predicted_window.per_second(),
    )
    yield _gauge("requests_processing", "Number of requests processing", reading.running)
    yield _gauge("requests_deferred", "Number of requests deferred", reading.waiting)
    yield _gauge(
        "n_busy_slots_per_decode",
        "Average number of busy slots per llama_decode() call",
        decodes.busy_slots / max(decodes.calls, 1),
    )


def _hearth_metrics(reading: MetricsReading) -> Iterator[Metric]:
    counters = reading.counters
    yield CounterMetricFamily(
        "hearth_busy_responses_total",
        "Requests refused with HTTP 503 because every queue place was taken "
        "(--multiuser), a key's share was (--multiuserperkey) or the server was shutting down",
        value=counters.busy_responses,
    )
    yield CounterMetricFamily(
        "hearth_aborts_total",
        "Requests stopped by /api/extra/abort, running or waiting",
        value=counters.aborts,
    )
    yield CounterMetricFamily(
        "hearth_disconnects_total",
        "Requests whose client left (or stopped reading) before their end",
        value=counters.disconnects,
    )
    requests = CounterMetricFamily(
        "hearth_requests_total", "Requests admitted to the queue, by API", labels=["dialect"]
    )
    for dialect, count in sorted(counters.requests_by_dialect.items()):
        requests.add_metric([dialect], count)
    yield requests
    wait = counters.queue_wait
    yield HistogramMetricFamily(
        "hearth_queue_wait_seconds",
        "Seconds from a request's admission to the start of its generation",
        buckets=[(_bucket_label(bound), count) for bound, count in wait.cumulative()],
        sum_value=wait.total_seconds,
    )


def _prompt_cache_metrics(cache: PromptCacheStats) -> Iterator[Metric]:
    yield CounterMetricFamily(
        "hearth_prompt_cache_saved_total",
        "Prompt KV states saved to the prompt cache when their slot moved on",
        value=cache.saved,
    )
    yield CounterMetricFamily(
        "hearth_prompt_cache_restored_total",
        "Prompt KV states restored from the prompt cache into a slot",
        value=cache.restored,
    )
    yield CounterMetricFamily(
        "hearth_prompt_cache_restored_tokens_total",
        "Prompt tokens that restores from the prompt cache spared reading again",
        value=cache.restored_tokens,
    )
    yield CounterMetricFamily(
        "hearth_prompt_cache_evicted_total",
        "Prompt KV states dropped from the prompt cache for room, least recently used first",
        value=cache.evicted,
    )
    yield GaugeMetricFamily(
        "hearth_prompt_cache_bytes",
        "Bytes of prompt KV states held in the prompt cache now",
        value=cache.bytes,
    )
    yield GaugeMetricFamily(
        "hearth_prompt_cache_states",
        "Prompt KV states held in the prompt cache now",
        value=cache.states,
    )
    yield GaugeMetricFamily(
        "hearth_prompt_cache_max_bytes",
        "Bound on the prompt cache's bytes (--cacheram), summed over the loaded models",
        value=cache.max_bytes,
    )
    if cache.disk_max_bytes:  # only with --cachedir
        yield GaugeMetricFamily(
            "hearth_prompt_cache_disk_bytes",
            "Bytes of prompt KV states kept in the --cachedir folder for the loaded models",
            value=cache.disk_bytes,
        )
        yield GaugeMetricFamily(
            "hearth_prompt_cache_disk_states",
            "Prompt KV states kept in the --cachedir folder for the loaded models",
            value=cache.disk_states,
        )


def _metrics_off_body() -> dict[str, object]:
    """llama-server's `not_supported_error` in the OpenAI shape its routes use."""
    error = {
        "message": METRICS_OFF_MESSAGE,
        "type": "not_supported_error",
        "param": None,
        "code": METRICS_OFF_STATUS,
    }
    return {"error": error}


def _bucket_label(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


@router.get("/metrics", dependencies=[key_required(Dialect.OPENAI)], include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text (not JSON, so not in /openapi.json), as llama-server serves it."""
    registry: CollectorRegistry | None = request.app.state.metrics_registry
    if registry is None:
        raise APIError(METRICS_OFF_STATUS, METRICS_OFF_MESSAGE, body=_metrics_off_body())
    started: float = request.app.state.started_at_unix
    response = Response(generate_latest(registry), media_type=TEXT_FORMAT)
    # llama-server sends it with every scrape, spelled so (its own tests look the name up
    # case-sensitively): a raw header, since Starlette lowercases those it is given.
    response.raw_headers.append((b"Process-Start-Time-Unix", str(int(started)).encode()))
    return response
