"""The running view's live part: requests open now with their Abort buttons, and the live
tokens/s plot, fed from the server's admin-only /api/admin/requests. A real launch on the
bundled model with two parallel slots, two streams at once, offscreen."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import httpx
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.run_view import RequestTable, RunView
from server.settings.config import HearthSettings
from tests.support.servers import free_port


def row(request_id: str, state: str, **values: Any) -> dict[str, Any]:
    return {
        "id": request_id,
        "client": "127.0.0.1:50000",
        "dialect": "kobold",
        "state": state,
        "prompt_done": 0,
        "prompt_total": 0,
        "tokens": 0,
        "tokens_per_second": 0.0,
        **values,
    }


def abort_button(table: RequestTable, index: int) -> QPushButton:
    button = table.cellWidget(index, len(RequestTable.COLUMNS) - 1)
    assert isinstance(button, QPushButton)
    return button


def test_each_row_aborts_its_own_request_once(qtbot: QtBot) -> None:
    table = RequestTable()
    qtbot.addWidget(table)
    table.show_rows([row("kai-1", "generating", tokens=40), row("kai-2", "waiting")])
    with qtbot.waitSignal(table.abort_requested) as asked:
        qtbot.mouseClick(abort_button(table, 1), Qt.MouseButton.LeftButton)
    assert asked.args == ["kai-2"]
    assert not abort_button(table, 1).isEnabled()  # asked once, until it is gone or refused
    assert abort_button(table, 0).isEnabled()
    # The first request ended meanwhile: kai-2 moves up, its button still says it is asked.
    table.show_rows([row("kai-2", "prompt", prompt_done=1200, prompt_total=4000)])
    assert not abort_button(table, 0).isEnabled()
    assert table.item(0, 3).text() == "prompt"
    progress = table.cellWidget(0, 4)
    assert progress is not None and progress.text() == "1200/4000"  # type: ignore[attr-defined]
    table.abort_failed("kai-2")
    table.show_rows([row("kai-2", "generating")])
    assert abort_button(table, 0).isEnabled()


def test_the_plot_follows_the_live_speed_and_falls_to_zero(qtbot: QtBot) -> None:
    view = RunView()
    qtbot.addWidget(view)
    view.show_live({"requests": [row("kai-1", "prompt")], "tokens_per_second": 0.0})
    assert not view.plot.points  # nothing generates yet
    for speed in (30.0, 32.5):
        view.show_live({"requests": [row("kai-1", "generating")], "tokens_per_second": speed})
    view.show_live({"requests": [], "tokens_per_second": 0.0})
    view.show_live({"requests": [], "tokens_per_second": 0.0})
    assert [value for _, value in view.plot.points] == [30.0, 32.5, 0.0]
    assert view.live_speed.text() == "-"


class Stream:
    """A streamed request read on its own thread: its data events, and when it has ended."""

    def __init__(self, url: str, body: dict[str, Any]) -> None:
        self.events: list[dict[str, Any]] = []
        self.done = threading.Event()
        threading.Thread(target=self._read, args=(url, body), daemon=True).start()

    def _read(self, url: str, body: dict[str, Any]) -> None:
        try:
            with httpx.stream("POST", url, json=body, timeout=300) as response:
                for line in response.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        self.events.append(json.loads(line[len("data: ") :]))
        finally:
            self.done.set()


def table_rows(table: RequestTable) -> list[dict[str, str]]:
    names = [name.lower() for name in RequestTable.COLUMNS]
    return [
        {names[c]: table.item(r, c).text() for c in (0, 1, 2, 3, 5) if table.item(r, c)}
        for r in range(table.rowCount())
    ]


def cache_figures(view: RunView) -> tuple[int, int]:
    """The prompts held and the hits, as the running view's prompt cache line shows them."""
    shown = re.fullmatch(
        r"Prompt cache: ([\d,]+) prompts? · .* · ([\d,]+) hits?, .*", view.prompt_cache.text()
    )
    assert shown, view.prompt_cache.text()
    return int(shown[1].replace(",", "")), int(shown[2].replace(",", ""))


@pytest.mark.model  # launches the real server
def test_live_rows_and_plot_while_streams_run_and_a_row_aborts_only_its_request(
    qtbot: QtBot,
) -> None:
    settings = HearthSettings(port_param=free_port(), contextsize=2048, parallelrequests=2)
    window = MainWindow(settings)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.server_ready, timeout=120_000):
        assert window.launch()
    base = f"http://127.0.0.1:{window.settings.port_param}"
    view, table = window.run_view, window.run_view.requests
    kept = Stream(
        f"{base}/api/extra/generate/stream",
        {"prompt": "A story:", "max_length": 200, "ban_eos_token": True},
    )
    doomed = Stream(  # llama-server's /completion (the OpenAI dialect's error shapes)
        f"{base}/completion",
        {"prompt": "A poem:", "n_predict": 2000, "ignore_eos": True, "stream": True},
    )

    def both_generating() -> bool:
        rows = table_rows(table)
        return len(rows) == 2 and all(r["state"] == "generating" for r in rows)

    qtbot.waitUntil(both_generating, timeout=120_000)
    assert {r["dialect"] for r in table_rows(table)} == {"kobold", "openai"}
    assert all(r["client"].startswith("127.0.0.1:") for r in table_rows(table))
    # Live points arrive while both streams run (not one per finished generation).
    plotted = len(view.plot.points)
    for _ in range(3):
        with qtbot.waitSignal(view.plot.added, timeout=10_000) as point:
            pass
        assert point.args[0] > 0
    assert len(view.plot.points) >= plotted + 3
    assert not kept.done.is_set() and not doomed.done.is_set()
    assert view.live_speed.text().endswith("tokens/s")

    doomed_row = next(i for i, r in enumerate(table_rows(table)) if r["dialect"] == "openai")
    qtbot.mouseClick(abort_button(table, doomed_row), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(doomed.done.is_set, timeout=60_000)
    assert doomed.events[-1]["stop"] is True
    assert len(doomed.events) < 2000  # cut short
    qtbot.waitUntil(kept.done.is_set, timeout=300_000)
    final = kept.events[-1]
    assert final["finish_reason"] == "length"  # the other one ran to its end
    qtbot.waitUntil(lambda: table.rowCount() == 0, timeout=10_000)
    assert view.plot.points[-1][1] == 0.0  # the line falls once nothing generates

    # The story's prompt again: its slot keeps the prompt and drops the 200 tokens after it,
    # which the prompt cache saves first (the cache is on by default).
    answer = httpx.post(f"{base}/api/v1/generate", json={"prompt": "A story:", "max_length": 4})
    assert answer.status_code == 200
    qtbot.waitUntil(lambda: cache_figures(view) != (0, 0), timeout=10_000)

    with qtbot.waitSignal(window.server.exited, timeout=20_000):
        view.stop_button.click()


def test_a_row_names_the_key_before_the_address(qtbot: QtBot) -> None:
    table = RequestTable()
    qtbot.addWidget(table)
    table.show_rows([row("kai-1", "waiting", key="alice"), row("kai-2", "waiting")])
    assert table.item(0, 1).text() == "alice (127.0.0.1:50000)"
    assert table.item(1, 1).text() == "127.0.0.1:50000"  # a server without keys
