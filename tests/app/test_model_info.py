"""The line under Quick Launch's model field: the GGUF's own facts and the memory it needs for
the chosen context against the machine's free memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app import model_info
from app.model_info import describe_model
from app.tabs.settings_tabs import QuickLaunchTab
from server.settings.config import HearthSettings


def test_the_models_facts_and_memory(bundled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_info, "available_memory", lambda: 16 * 2**30)
    info = describe_model(bundled, 4096)
    facts, memory = info.text.split("\n")
    assert facts == (
        "gemma3 · 268.10M parameters · Q4_K_M · trained context 32768 · "
        "no chat template (a base model?) · 241 MiB"
    )
    assert memory.startswith("Needs about ") and memory.endswith("; 16.0 GiB free.")
    assert not info.problem
    longer = describe_model(bundled, 65536)
    assert "(longer than the 32768 it was trained for)" in longer.text
    small = int(memory.split()[2].replace(",", ""))  # MiB needed at 4096 tokens
    assert int(longer.text.split("\n")[1].split()[2].replace(",", "")) > small


def test_too_little_memory_is_a_warning(bundled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_info, "available_memory", lambda: 300 * 2**20)
    info = describe_model(bundled, 4096)
    assert info.problem
    assert "more than the 300 MiB free: offload layers to a GPU or choose a smaller context" in (
        info.text
    )


def test_a_file_that_is_not_a_gguf_says_so(tmp_path: Path) -> None:
    junk = tmp_path / "notes.gguf"
    junk.write_text("hello")
    info = describe_model(junk, 4096)
    assert info.problem and info.text.startswith("Not a usable GGUF: ")


def test_quick_launch_shows_it_and_follows_the_context(qtbot: QtBot, bundled: Path) -> None:
    tab = QuickLaunchTab()
    qtbot.addWidget(tab)
    tab.load(HearthSettings(model_param=str(bundled), contextsize=4096))
    assert tab.model_info.text().startswith("gemma3 · 268.10M parameters")
    before = tab.model_info.text().split("\n")[1]
    tab.context_size.setValue(32768)
    assert tab.model_info.text().split("\n")[1] != before
    tab.model_path.setText("/no/such/model.gguf")
    tab.model_path.editingFinished.emit()
    assert tab.model_info.text() == "No such file."
    tab.model_path.setText("https://huggingface.co/o/r/resolve/main/m.gguf")
    tab.model_path.editingFinished.emit()
    assert tab.model_info.text() == "Downloaded when the server starts."
