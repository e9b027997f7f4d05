"""Reading `/metrics` in tests: Prometheus text parsed by prometheus-client's own parser."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

# llama-server's set (tools/server/server-task.cpp), by sample name → its `# TYPE` line's type.
LLAMA_SERVER_COUNTERS = (
    "llamacpp:prompt_tokens_total",
    "llamacpp:prompt_tokens_cached_total",
    "llamacpp:prompt_seconds_total",
    "llamacpp:tokens_predicted_total",
    "llamacpp:tokens_predicted_seconds_total",
    "llamacpp:n_decode_total",
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total",
    "llamacpp:spec_decode_num_drafts_total",
)
LLAMA_SERVER_GAUGES = (
    "llamacpp:n_tokens_max",  # a counter in llama-server: see server/dialects/routes/metrics.py
    "llamacpp:prompt_tokens_seconds",
    "llamacpp:predicted_tokens_seconds",
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:n_busy_slots_per_decode",
)


class Scrape:
    """One `/metrics` answer: its raw text and every sample by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value

    def value(self, name: str, **labels: str) -> float:
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def declared_type(self, name: str) -> str | None:
        """The type the `# TYPE` line gives `name`, exactly as written."""
        for line in self.text.splitlines():
            if line.startswith(f"# TYPE {name} "):
                return line.split(" ")[3]
        return None


def scrape(base_url: str, headers: dict[str, str] | None = None) -> Scrape:
    response = httpx.get(f"{base_url}/metrics", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return Scrape(response.text)


def scrape_until(
    base_url: str, condition: Callable[[Scrape], bool], timeout: float = 30.0
) -> Scrape:
    """Scrape until `condition` holds (the server gets there on its own); fail after
    `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        current = scrape(base_url)
        if condition(current):
            return current
        if time.monotonic() > deadline:
            raise AssertionError(f"/metrics never got there:\n{current.text}")
        time.sleep(0.02)  # a poll interval, not a wait for something to happen
