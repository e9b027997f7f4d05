"""The launcher names, on loading a settings file, the keys Hearth does not apply, and why."""

from __future__ import annotations

import json
from pathlib import Path

from app.main_window import MainWindow
from app.settings_store import NOTICE_KEYS
from server.settings.kcpps import read_kcpps_dict
from server.settings.key_fates import not_applied, not_applied_lines
from tests.support.servers import ROOT

FIXTURES = ROOT / "tests" / "fixtures"
FULL_PRESET = FIXTURES / "koboldcpp-1.116-full.kcpps"


def test_loading_a_full_koboldcpp_preset_names_what_is_not_applied(window: MainWindow) -> None:
    assert window.load_file(FULL_PRESET)
    # The launcher reads its loaded settings (Hearth's fields first, then the file's other
    # keys): the same keys as the file names, in that order.
    fates = not_applied(window.settings.model_dump())
    in_file = not_applied(read_kcpps_dict(FULL_PRESET))
    assert sorted(fate.key for fate in fates) == sorted(fate.key for fate in in_file)
    first = ", ".join(fate.key for fate in fates[: NOTICE_KEYS - 1])
    assert window.notice.text() == (
        f"Loaded {FULL_PRESET.name}. Not applied by Hearth: {first}, "
        f"and {len(fates) - NOTICE_KEYS + 1} more (hover here for why)."
    )
    assert not window.notice.isHidden()
    # The tooltip names every one of them, with its reason: the console's own lines.
    assert window.notice.toolTip() == "\n".join(not_applied_lines(fates, FULL_PRESET.name))
    assert "  remotetunnel (no Cloudflare tunnel" in window.notice.toolTip()


def test_a_few_keys_are_all_named_and_the_next_notice_drops_them(
    window: MainWindow, tmp_path: Path
) -> None:
    preset = tmp_path / "small.kcpps"
    preset.write_text(json.dumps({"sdmodel": "flux.gguf", "remotetunnel": True, "threads": 2}))
    assert window.load_file(preset)
    assert window.notice.text() == (
        "Loaded small.kcpps. Not applied by Hearth: sdmodel, remotetunnel (hover here for why)."
    )
    assert "remotetunnel (no Cloudflare tunnel" in window.notice.toolTip()

    assert window.load_file(FIXTURES / "koboldcpp-saved.kcpps")  # everything at defaults
    assert window.notice.text() == "Loaded koboldcpp-saved.kcpps."
    assert window.notice.toolTip() == ""
