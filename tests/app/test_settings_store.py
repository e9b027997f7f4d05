from __future__ import annotations

from pathlib import Path

from app.log_buffer import LineAssembler
from app.settings_store import (
    Preferences,
    apply_launcher_rules,
    load_preferences,
    save_preferences,
)
from server.settings.config import HearthSettings


def test_launcher_rules_show_low_multiuser_as_10_and_parallel_as_1() -> None:
    shown = apply_launcher_rules(HearthSettings(multiuser=0, parallelrequests=0))
    assert (shown.multiuser, shown.parallelrequests) == (10, 1)
    assert apply_launcher_rules(HearthSettings(multiuser=5)).multiuser == 5


def test_preferences_round_trip_through_toml(tmp_path: Path) -> None:
    path = tmp_path / "launcher.toml"
    preferences = Preferences(HearthSettings(port_param=6001, password=None, quiet=True))
    preferences.remember_file(Path("/a.kcpps"))
    preferences.remember_file(Path("/b.kcpps"))
    preferences.remember_file(Path("/a.kcpps"))
    save_preferences(preferences, path)
    loaded = load_preferences(path)
    assert loaded.last_settings.port_param == 6001 and loaded.last_settings.quiet
    assert loaded.recent_files == ["/a.kcpps", "/b.kcpps"]


def test_unreadable_preferences_fall_back_to_defaults(tmp_path: Path) -> None:
    path = tmp_path / "launcher.toml"
    path.write_text("this is [ not toml")
    assert load_preferences(path).last_settings == HearthSettings()


def test_line_assembler_keeps_split_characters_and_lines() -> None:
    assembler = LineAssembler()
    data = "héllo\r\nwor".encode() + "ld 🔥".encode()[:-2]
    assert assembler.feed(data[:2]) == []
    assert assembler.feed(data[2:]) == ["héllo"]
    assert assembler.feed("🔥".encode()[-2:] + b"\nnext") == ["world 🔥"]
    assert assembler.flush() == ["next"]
