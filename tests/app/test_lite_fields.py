"""KoboldAI Lite's server features in the launcher, where KoboldCpp's launcher has them: Shared
Multiplayer and Enable WebSearch on the Network tab, Preload Story and SaveData File (with
Browse…) on the Loaded Files tab; a KoboldCpp file's values shown and saved back, a launch
template's embedded story kept, and the server given what the form says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QCheckBox, QLineEdit, QPushButton

from app.main_window import MainWindow
from app.tabs import lite_table
from app.tabs.bindings import Binding
from app.tabs.lite_table import EMBEDDED_PLACEHOLDER
from server.settings.config import HearthSettings
from tests.app.launching import launched_settings
from tests.support.servers import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
KEYS = ("multiplayer", "websearch", "preloadstory", "savedatafile")
BINDINGS = [value for value in vars(lite_table).values() if isinstance(value, Binding)]


def saved_keys(window: MainWindow, tmp_path: Path) -> dict[str, Any]:
    saved = window.save_file(tmp_path / "saved.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    return {key: data[key] for key in KEYS}


def load_written(window: MainWindow, tmp_path: Path, **keys: Any) -> None:
    written = {**json.loads((FIXTURES / "koboldcpp-saved.kcpps").read_text()), **keys}
    loaded = tmp_path / "koboldcpp.kcpps"
    loaded.write_text(json.dumps(written))
    assert window.load_file(loaded)


def test_the_fields_sit_where_koboldcpp_has_them(window: MainWindow) -> None:
    network, loaded = window.network, window.loaded
    assert isinstance(network.multiplayer, QCheckBox)
    assert network.multiplayer.text() == "Shared Multiplayer"
    assert network.websearch.text() == "Enable WebSearch"
    assert isinstance(loaded.preload_story, QLineEdit)
    for key in ("preloadstory", "savedatafile"):
        browse = loaded.row_widget(key).findChild(QPushButton)
        assert browse is not None and browse.text() == "Browse…"
    assert not network.multiplayer.isChecked() and not network.websearch.isChecked()
    assert loaded.preload_story.text() == loaded.savedata_file.text() == ""


def test_a_koboldcpp_file_s_values_show_and_save_back(window: MainWindow, tmp_path: Path) -> None:
    written = {
        "multiplayer": True,
        "websearch": True,
        "preloadstory": "/home/ana/kobold/story.json",
        "savedatafile": "/home/ana/kobold/savedata.jsondb",
    }
    load_written(window, tmp_path, **written)
    assert window.network.multiplayer.isChecked() and window.network.websearch.isChecked()
    assert window.loaded.preload_story.text() == written["preloadstory"]
    assert window.loaded.savedata_file.text() == written["savedatafile"]
    assert saved_keys(window, tmp_path) == written
    # unticked and emptied, they save as KoboldCpp's "off"
    window.network.multiplayer.setChecked(False)
    window.loaded.preload_story.setText("")
    saved = saved_keys(window, tmp_path)
    assert (saved["multiplayer"], saved["preloadstory"]) == (False, None)


def test_a_launch_template_s_embedded_story_is_kept_until_a_file_replaces_it(
    window: MainWindow, tmp_path: Path
) -> None:
    story = {"gamestarted": True, "prompt": "Once upon a time"}
    load_written(window, tmp_path, preloadstory=story)
    field = window.loaded.preload_story
    assert field.text() == "" and field.placeholderText() == EMBEDDED_PLACEHOLDER
    assert saved_keys(window, tmp_path)["preloadstory"] == story
    field.setText("/stories/other.json")
    assert saved_keys(window, tmp_path)["preloadstory"] == "/stories/other.json"
    load_written(window, tmp_path, preloadstory=None)  # the next file has none: nothing kept
    assert field.placeholderText() != EMBEDDED_PLACEHOLDER
    assert saved_keys(window, tmp_path)["preloadstory"] is None


def test_launching_gives_the_server_what_the_form_says(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    window.network.multiplayer.setChecked(True)
    window.network.websearch.setChecked(True)
    window.loaded.savedata_file.setText(str(tmp_path / "saves.sqlite"))
    settings = launched_settings(window, monkeypatch)
    assert (settings.multiplayer, settings.websearch) == (True, True)
    assert settings.savedatafile == str(tmp_path / "saves.sqlite")


@pytest.mark.parametrize("binding", BINDINGS, ids=lambda binding: binding.key)
def test_the_tooltips_are_the_settings_descriptions(binding: Binding[Any]) -> None:
    description = HearthSettings.model_fields[binding.key].description or ""
    assert description and binding.tooltip().startswith(description)
    assert binding.more and binding.more in binding.tooltip()
