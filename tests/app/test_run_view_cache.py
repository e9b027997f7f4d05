"""The running view's prompt cache line, from /api/extra/perf's `prompt_cache` (what the
cache holds against its bound, and what it spared), "off" when the server keeps no prompts."""

from __future__ import annotations

from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.run_view import RunView

MIB = 2**20


def cache(**values: int) -> dict[str, int]:
    """A perf `prompt_cache` as the server sends it (server/dialects/kobold/routes.py)."""
    return {
        "states": 12,
        "bytes": 310 * MIB,
        "max_bytes": 2048 * MIB,
        "saved": 50,
        "restored": 41,
        "restored_tokens": 45_100,
        "evicted": 3,
        **values,
    }


@pytest.fixture
def view(qtbot: QtBot) -> RunView:
    shown = RunView()
    qtbot.addWidget(shown)
    return shown


def test_the_line_says_what_the_cache_holds_and_spared(view: RunView) -> None:
    assert view.prompt_cache.text() == "Prompt cache: -"  # nothing polled yet
    view.show_perf({"queue": 0, "idle": 1, "prompt_cache": cache()})
    assert view.prompt_cache.text() == (
        "Prompt cache: 12 prompts · 310 MiB of 2,048 MiB in memory · 41 hits, 45,100 tokens reused"
    )
    # A small model's states are a few MiB; one of each reads in the singular.
    view.show_perf({"prompt_cache": cache(states=1, bytes=3 * MIB // 2, restored=1)})
    assert view.prompt_cache.text() == (
        "Prompt cache: 1 prompt · 1.5 MiB of 2,048 MiB in memory · 1 hit, 45,100 tokens reused"
    )


def test_the_disk_part_shows_only_when_the_server_reports_a_folder(view: RunView) -> None:
    view.show_perf({"prompt_cache": cache(disk_bytes=1288 * MIB)})
    assert " · 310 MiB of 2,048 MiB in memory · 1.3 GiB on disk · " in view.prompt_cache.text()
    view.show_perf({"prompt_cache": cache(disk_bytes=200 * MIB)})
    assert " · 200 MiB on disk · " in view.prompt_cache.text()
    view.show_perf({"prompt_cache": cache()})
    assert "disk" not in view.prompt_cache.text()


@pytest.mark.parametrize(
    "perf",
    [
        {"prompt_cache": cache(max_bytes=0, states=0, bytes=0)},  # --cacheram 0
        {"prompt_cache": None},  # an engine that keeps no prompts
        {"queue": 0, "idle": 1},  # a server older than the cache
    ],
)
def test_the_line_says_off_when_no_prompts_are_kept(view: RunView, perf: dict[str, Any]) -> None:
    view.show_perf({"prompt_cache": cache()})
    view.show_perf(perf)
    assert view.prompt_cache.text() == "Prompt cache: off"
