"""The prompt cache as clients see it, over real HTTP with scripted engines: `/api/extra/perf`'s
`prompt_cache` and the `hearth_prompt_cache_*` metrics. States are put in the engine's cache
directly (the scripted engine never saves any); the engine's own saving and restoring is tested
with the real model."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from server.core.caching.prompt_cache import MIB, PromptCache, SavedState
from server.settings.config import HearthSettings
from tests.support.metrics_reader import scrape
from tests.support.scripted_engine import CachingScriptedEngine, ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]

PROMPT_CACHE_COUNTERS = {
    "hearth_prompt_cache_saved_total": "saved",
    "hearth_prompt_cache_restored_total": "restored",
    "hearth_prompt_cache_restored_tokens_total": "restored_tokens",
    "hearth_prompt_cache_evicted_total": "evicted",
}
PROMPT_CACHE_GAUGES = {
    "hearth_prompt_cache_bytes": "bytes",
    "hearth_prompt_cache_states": "states",
    "hearth_prompt_cache_max_bytes": "max_bytes",
}


def filled_cache() -> PromptCache:
    """Four states of 1 MiB under a 3 MiB bound (the first evicted), one restored."""
    cache = PromptCache(3 * MIB)
    states = [SavedState((index, 1, 2), None, MIB) for index in range(4)]
    for state in states:
        assert cache.put(state)
    cache.used(states[3], 3)
    return cache


def perf_cache(base_url: str) -> object:
    response = httpx.get(f"{base_url}/api/extra/perf")
    assert response.status_code == 200
    return response.json()["prompt_cache"]


def test_perf_shows_the_prompt_cache_and_null_for_an_engine_that_keeps_none(
    serve_engine: Serve,
) -> None:
    assert perf_cache(serve_engine(ScriptedEngine()).base_url) is None
    caching = serve_engine(CachingScriptedEngine(prompt_cache=filled_cache()))
    assert perf_cache(caching.base_url) == {
        "states": 3,
        "bytes": 3 * MIB,
        "max_bytes": 3 * MIB,
        "saved": 4,
        "restored": 1,
        "restored_tokens": 3,
        "evicted": 1,
    }


def test_metrics_show_the_prompt_cache_with_counter_and_gauge_types(serve_engine: Serve) -> None:
    engine = CachingScriptedEngine(prompt_cache=filled_cache())
    base_url = serve_engine(engine, HearthSettings(metrics=True)).base_url
    reading = scrape(base_url)
    expected = {
        name: getattr(engine.prompt_cache.stats(), field)
        for name, field in {**PROMPT_CACHE_COUNTERS, **PROMPT_CACHE_GAUGES}.items()
    }
    assert {name: reading.value(name) for name in expected} == expected
    for names, kind in ((PROMPT_CACHE_COUNTERS, "counter"), (PROMPT_CACHE_GAUGES, "gauge")):
        for name in names:
            assert reading.declared_type(name) == kind and f"# HELP {name} " in reading.text
    engine.prompt_cache.clear()  # what is held falls; what was done stays
    after = scrape(base_url)
    assert after.value("hearth_prompt_cache_states") == 0
    assert after.value("hearth_prompt_cache_bytes") == 0
    assert after.value("hearth_prompt_cache_saved_total") == 4


def test_metrics_have_no_prompt_cache_lines_for_an_engine_that_keeps_none(
    serve_engine: Serve,
) -> None:
    base_url = serve_engine(ScriptedEngine(), HearthSettings(metrics=True)).base_url
    reading = scrape(base_url)
    assert "hearth_queue_wait_seconds" in reading.text  # Hearth's others are there
    assert "hearth_prompt_cache" not in reading.text
