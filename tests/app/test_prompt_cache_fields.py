"""The Context tab's Prompt Cache (MiB) and SmartCache Slots fields: bound to `cacheram` and
`smartcache`, kept in .kcpps files, handed to the launched server, and enabled only where
they mean something."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.tabs.settings_tabs import ContextTab
from server.base.defaults import DEFAULT_CACHE_RAM_MIB
from tests.app.launching import launched_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_the_fields_sit_by_contextshift_and_show_the_defaults(window: MainWindow) -> None:
    context = window.context
    rows = [key for key in context.read() if key in ("noshift", "cacheram", "smartcache")]
    assert rows == ["noshift", "cacheram", "smartcache"]
    assert context.prompt_cache.value() == DEFAULT_CACHE_RAM_MIB
    assert context.smart_cache.value() == 0 and context.smart_cache.text() == "No limit"
    assert f"default {DEFAULT_CACHE_RAM_MIB} MiB" in context.prompt_cache.toolTip()
    assert "Unlike KoboldCpp, 0 does not turn the cache off" in context.smart_cache.toolTip()


def test_edited_fields_reach_the_settings_and_the_launched_server(
    window: MainWindow, qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    context = window.context
    with qtbot.waitSignal(context.prompt_cache.valueChanged) as changed:
        context.prompt_cache.setValue(512)
    assert changed.args == [512]
    with qtbot.waitSignal(context.smart_cache.valueChanged):
        context.smart_cache.setValue(5)
    context.cache_dir.setText(str(tmp_path))
    context.cache_disk.setValue(4096)
    context.private_cache.setChecked(True)
    settings = window.read_settings()
    assert settings is not None and (settings.cacheram, settings.smartcache) == (512, 5)
    assert (settings.cachedir, settings.cachedisk, settings.privatecache) == (
        str(tmp_path),
        4096,
        True,
    )

    served = launched_settings(window, monkeypatch)
    assert (served.cacheram, served.smartcache) == (512, 5)
    assert (served.cachedir, served.cachedisk, served.privatecache) == (str(tmp_path), 4096, True)
    context.cache_dir.clear()
    settings = window.read_settings()
    assert settings is not None and settings.cachedir is None  # empty: in memory only


def test_the_fields_round_trip_through_a_koboldcpp_file(window: MainWindow, tmp_path: Path) -> None:
    """KoboldCpp's file has `smartcache` but no `cacheram`: the slots load as written, the
    MiB as Hearth's default, and a save writes both (unknown keys kept)."""
    original = json.loads((FIXTURES / "koboldcpp-saved.kcpps").read_text())
    loaded = tmp_path / "koboldcpp.kcpps"
    loaded.write_text(json.dumps({**original, "smartcache": 5}))
    window.context.prompt_cache.setValue(64)  # so the load has something to replace
    assert window.load_file(loaded)
    assert window.context.smart_cache.value() == 5
    assert window.context.prompt_cache.value() == DEFAULT_CACHE_RAM_MIB
    saved = window.save_file(tmp_path / "saved.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    assert (data["smartcache"], data["cacheram"]) == (5, DEFAULT_CACHE_RAM_MIB)
    assert data["chatcompletionsadapter"] == original["chatcompletionsadapter"]

    window.context.prompt_cache.setValue(0)
    window.context.smart_cache.setValue(0)
    saved = window.save_file(tmp_path / "off.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    assert (data["cacheram"], data["smartcache"]) == (0, 0)
    assert window.load_file(saved)
    assert window.context.prompt_cache.text() == "Off"


def test_the_fields_follow_fastforwarding_and_keep_their_values(
    qtbot: QtBot, window: MainWindow
) -> None:
    """The cache is filled from reused prefixes, so both fields need FastForwarding; the slot
    count needs a cache that is on. Disabled fields still save what they hold."""
    context: ContextTab = window.context
    assert context.prompt_cache.isEnabled() and context.smart_cache.isEnabled()
    context.smart_cache.setValue(4)
    with qtbot.waitSignal(context.fast_forward.toggled):
        context.fast_forward.click()
    assert not context.prompt_cache.isEnabled() and not context.smart_cache.isEnabled()
    settings = window.read_settings()
    assert settings is not None and settings.nofastforward
    assert (settings.cacheram, settings.smartcache) == (DEFAULT_CACHE_RAM_MIB, 4)

    with qtbot.waitSignal(context.fast_forward.toggled):
        context.fast_forward.click()
    assert context.prompt_cache.isEnabled() and context.smart_cache.isEnabled()
    with qtbot.waitSignal(context.prompt_cache.valueChanged):
        context.prompt_cache.setValue(0)
    assert context.prompt_cache.isEnabled() and not context.smart_cache.isEnabled()
    for key in ("cachedir", "cachedisk", "privatecache"):  # a folder's Browse… button too
        assert not context.row_widget(key).isEnabled(), key
    settings = window.read_settings()
    assert settings is not None and (settings.cacheram, settings.smartcache) == (0, 4)
