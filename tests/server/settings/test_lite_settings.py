"""KoboldAI Lite's server features as settings (server/settings/lite_fields.py): KoboldCpp's
flags and `.kcpps` keys, applied, round-tripped through a real KoboldCpp 1.116 file, and a
file they name that cannot be used stopping the start with its reason."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from server.dialects.kobold.lite import LiteSetupError, lite_features, preloaded_story
from server.process import serve as serve_command
from server.process.exit_codes import EXIT_USAGE
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from server.settings.kcpps import load_kcpps, read_kcpps_dict, save_kcpps
from server.settings.key_fates import not_applied, reason_not_applied
from tests.support.servers import free_port

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FULL_PRESET = FIXTURES / "koboldcpp-1.116-full.kcpps"
KEYS = ("multiplayer", "websearch", "savedatafile", "preloadstory")


def test_koboldcpp_s_flags_set_them() -> None:
    settings = parse_command_line(
        [
            "--multiplayer",
            "--websearch",
            "--savedatafile",
            "saves.sqlite",
            "--preloadstory",
            "story.json",
        ]
    ).settings
    assert (settings.multiplayer, settings.websearch) == (True, True)
    assert (settings.savedatafile, settings.preloadstory) == ("saves.sqlite", "story.json")
    defaults = HearthSettings()
    assert [getattr(defaults, key) for key in KEYS] == [False, False, None, None]


def test_a_koboldcpp_file_s_keys_are_applied_and_saved_back(tmp_path: Path) -> None:
    written = read_kcpps_dict(FULL_PRESET)
    settings = load_kcpps(FULL_PRESET)
    assert {key: getattr(settings, key) for key in KEYS} == {key: written[key] for key in KEYS}
    assert all(reason_not_applied(key) is None for key in KEYS)
    assert not {fate.key for fate in not_applied(written)} & set(KEYS)
    copy = tmp_path / "copy.kcpps"
    save_kcpps(settings, copy)
    assert {key: json.loads(copy.read_text())[key] for key in KEYS} == {
        key: written[key] for key in KEYS
    }


def test_a_launch_template_s_embedded_story_round_trips(tmp_path: Path) -> None:
    template = tmp_path / "story.kcppt"
    story = {"gamestarted": True, "prompt": "Once", "memory": ""}
    template.write_text(json.dumps({"istemplate": True, "preloadstory": story}))
    settings = load_kcpps(template)
    assert settings.preloadstory == story
    copy = tmp_path / "copy.kcppt"
    save_kcpps(settings, copy)
    assert json.loads(copy.read_text())["preloadstory"] == story


@pytest.mark.parametrize("blank", ["", "  ", None, {}])
def test_koboldcpp_s_blanks_are_unset(blank: object) -> None:
    settings = HearthSettings.model_validate({"preloadstory": blank, "savedatafile": blank or ""})
    assert (settings.preloadstory, settings.savedatafile) == (None, None)


def test_a_preloaded_story_must_be_json(tmp_path: Path) -> None:
    good = tmp_path / "story.json"
    good.write_bytes(b'{"prompt": "x"}\n')
    assert preloaded_story(str(good)) == good.read_bytes()  # served as the file has it
    assert preloaded_story('{"prompt": "inline"}') == b'{"prompt": "inline"}'
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    with pytest.raises(LiteSetupError, match=r"bad\.json: not a JSON story"):
        preloaded_story(str(bad))
    with pytest.raises(LiteSetupError, match=r"missing\.json: No such file"):
        preloaded_story(str(tmp_path / "missing.json"))


def test_a_save_data_file_that_is_neither_sqlite_nor_koboldcpp_s_is_refused(
    tmp_path: Path,
) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00\x01 not a database at all" * 100)
    with pytest.raises(LiteSetupError, match=r"--savedatafile .*junk\.db: not a SQLite database"):
        lite_features(HearthSettings(savedatafile=str(junk)))
    assert junk.read_bytes().startswith(b"\x00\x01")  # left as it was
    features = lite_features(HearthSettings(savedatafile=str(tmp_path / "new" / "saves.db")))
    assert features.save_slots is not None and (tmp_path / "new" / "saves.db").is_file()
    assert lite_features(HearthSettings()).save_slots is None


def test_serving_stops_at_a_bad_file_before_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(serve_command, "setup_console_logging", lambda: None)
    caplog.set_level(logging.INFO, logger="hearth")
    missing = tmp_path / "nowhere" / "story.json"
    args = ["--skiplauncher", "--port", str(free_port()), "--preloadstory", str(missing)]
    assert serve_command.main(["--model", str(tmp_path / "no-model.gguf"), *args]) == EXIT_USAGE
    assert caplog.records[-1].getMessage() == (
        f"hearth: --preloadstory {missing}: No such file or directory"
    )
