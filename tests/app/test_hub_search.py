"""Search Hugging Face in the launcher, against a local stand-in for the Hub (HF_ENDPOINT's job):
search → files → download with progress → the model field filled → Launch serves it; Cancel
and resume; a gated repository's message."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.hub_client import HubClient
from app.hub_dialog import HubSearchDialog
from app.main_window import MainWindow
from app.tabs.settings_tabs import QuickLaunchTab
from server.models.hub import repository_files, search_repositories
from server.settings.config import HearthSettings
from tests.support.hub_server import GATED_REPO, MODEL_FILE, REPO, STORY_FILE, STORY_REPO, LocalHub
from tests.support.servers import free_port


def test_search_and_files_with_sizes_and_quantizations(hub: LocalHub, bundled: Path) -> None:
    hits = search_repositories("gemma")
    assert [hit.repo for hit in hits] == [REPO]
    assert (hits[0].downloads, hits[0].likes) == (1000, 10)
    files = repository_files(REPO)
    assert [(f.name, f.quant, f.size) for f in files] == [
        ("gemma-3-270m-Q4_K_M.gguf", "Q4_K_M", bundled.stat().st_size),
        ("gemma-3-270m-Q8_0.gguf", "Q8_0", bundled.stat().st_size),
    ]
    (story,) = search_repositories("story writer")
    assert story.repo == STORY_REPO
    (story_file,) = repository_files(STORY_REPO)
    assert (story_file.name, story_file.quant) == (STORY_FILE, "Q4_K_M")
    assert story_file.size != bundled.stat().st_size  # the other model: its own size


def search_in(dialog: HubSearchDialog, qtbot: QtBot, query: str) -> None:
    with qtbot.waitSignal(dialog.hub.searched, timeout=30_000):
        dialog.query.setText(query)
        dialog.search_button.click()


def choose_repo(dialog: HubSearchDialog, qtbot: QtBot, row: int = 0) -> None:
    with qtbot.waitSignal(dialog.hub.files_listed, timeout=30_000):
        dialog.repo_table.selectRow(row)


@pytest.mark.model  # launches the real server
def test_search_download_and_launch(hub: LocalHub, bundled: Path, qtbot: QtBot) -> None:
    window = MainWindow(HearthSettings(port_param=free_port(), contextsize=2048))
    qtbot.addWidget(window)
    window.quick.open_hub_search()
    dialog = window.quick.hub_dialog
    assert dialog is not None and dialog.isVisible()
    search_in(dialog, qtbot, "gemma 3")
    assert dialog.repo_table.item(0, 0).text() == REPO
    assert dialog.repo_table.item(0, 1).text() == "1,000"
    choose_repo(dialog, qtbot)
    assert dialog.file_table.item(0, 0).text() == MODEL_FILE
    assert dialog.file_table.item(0, 1).text() == "Q4_K_M"
    assert dialog.file_table.item(0, 2).text() == "241 MiB"
    dialog.file_table.selectRow(0)
    progress: list[tuple[int, int]] = []
    window.hub.progress.connect(lambda done, total, _speed: progress.append((done, total)))
    with qtbot.waitSignal(dialog.accepted, timeout=120_000):
        dialog.download_button.click()
    size = bundled.stat().st_size
    assert progress and progress[-1] == (size, size)
    chosen = Path(window.quick.model_path.text())
    assert chosen.name == MODEL_FILE and chosen.stat().st_size == size
    assert window.quick.model_info.text().startswith("gemma3 · 268.10M parameters")
    with qtbot.waitSignal(window.server_ready, timeout=120_000):
        window.launch()
    assert any(
        MODEL_FILE in line for line in window.server.last_lines + window.run_view.log.text_lines()
    )
    with qtbot.waitSignal(window.server.exited, timeout=30_000):
        window.stop()


def test_cancel_keeps_the_partial_file_and_download_resumes(
    hub: LocalHub, bundled: Path, qtbot: QtBot
) -> None:
    hub.seconds_per_chunk = 0.05  # ~12 s for the whole file: time to cancel midway
    client = HubClient()
    dialog = HubSearchDialog(client)
    qtbot.addWidget(dialog)
    search_in(dialog, qtbot, "gemma")
    choose_repo(dialog, qtbot)
    dialog.file_table.selectRow(0)
    with qtbot.waitSignal(client.progress, timeout=30_000):
        dialog.download_button.click()
    with qtbot.waitSignal(client.cancelled, timeout=30_000):
        dialog.cancel_button.click()
    assert "Cancelled. Download again to resume" in dialog.status.text()
    assert dialog.download_button.isEnabled()
    hub.seconds_per_chunk = 0.0
    with qtbot.waitSignal(dialog.accepted, timeout=120_000):
        dialog.download_button.click()
    ranges = [request.range for request in hub.downloads_of(MODEL_FILE)]
    assert ranges[0] is None and ranges[-1] is not None and ranges[-1] != "bytes=0-"
    assert Path(dialog.chosen_path).stat().st_size == bundled.stat().st_size


def test_a_gated_repository_says_what_to_do(hub: LocalHub, qtbot: QtBot) -> None:
    client = HubClient()
    dialog = HubSearchDialog(client)
    qtbot.addWidget(dialog)
    search_in(dialog, qtbot, "gated")
    assert dialog.repo_table.item(0, 0).text() == f"{GATED_REPO} (gated)"
    with qtbot.waitSignal(client.files_listed, timeout=30_000):
        dialog.repo_table.selectRow(0)  # listing works; the download needs the token
    dialog.file_table.selectRow(0)
    with qtbot.waitSignal(client.failed, timeout=30_000):
        dialog.download_button.click()
    assert dialog.status.text().startswith(f"{GATED_REPO} is gated: accept its terms")


def test_quick_launch_has_the_search_button(qtbot: QtBot) -> None:
    tab = QuickLaunchTab(gpu_backends=())
    qtbot.addWidget(tab)
    assert tab.search_hub.text() == "Search Hugging Face…"
