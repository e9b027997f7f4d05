"""One settings model for the command line and .kcpps files, compatible with KoboldCpp's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.base.defaults import DEFAULT_CACHE_RAM_MIB
from server.devices.placement import Placement
from server.process.console import announce_start
from server.process.exit_codes import EXIT_USAGE
from server.process.serve import main as serve_main
from server.settings.cli import build_parser, parse_command_line
from server.settings.config import HearthSettings
from server.settings.kcpps import SettingsFileError, load_kcpps, save_kcpps

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KOBOLDCPP_FILE = FIXTURES / "koboldcpp-saved.kcpps"


def test_koboldcpp_file_round_trip_keeps_every_key(tmp_path: Path) -> None:
    original = json.loads(KOBOLDCPP_FILE.read_text())
    settings = load_kcpps(KOBOLDCPP_FILE)
    assert (settings.port_param, settings.contextsize, settings.defaultgenamt) == (5005, 8192, 640)
    assert settings.model_param is None and settings.quiet is True

    written = save_kcpps(settings, tmp_path / "copy.kcpps")
    saved = json.loads(written.read_text())
    for key, value in original.items():
        if key != "model_param":  # "" and null both mean "no model"; Hearth writes null
            assert saved[key] == value, key
    assert saved["model_param"] is None
    assert written.read_text().startswith('{\n  "')  # indented like KoboldCpp's


def test_changed_values_are_saved_and_unknown_keys_survive(tmp_path: Path) -> None:
    settings = load_kcpps(KOBOLDCPP_FILE)
    settings.port_param = 6000
    saved = json.loads(save_kcpps(settings, tmp_path / "x.kcpps").read_text())
    assert saved["port_param"] == 6000
    assert saved["chatcompletionsadapter"] == "AutoGuess"
    assert saved["gendefaults"] == {"temperature": 0.8}


def test_save_adds_the_suffix_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    written = save_kcpps(HearthSettings(), tmp_path / "mine")
    assert written.name == "mine.kcpps"
    assert os.listdir(tmp_path) == ["mine.kcpps"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"port_param": "high"}', "port_param"),
        ('{"multiuser": -3}', "multiuser"),
    ],
)
def test_malformed_file_is_a_clear_error_and_is_not_touched(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "bad.kcpps"
    path.write_text(content)
    with pytest.raises(SettingsFileError) as caught:
        load_kcpps(path)
    assert str(path) in str(caught.value) and problem in str(caught.value)
    assert path.read_text() == content


def test_missing_file_is_named() -> None:
    with pytest.raises(SettingsFileError, match="no such file"):
        parse_command_line(["--config", "/nonexistent/x.kcpps"])


def test_explicit_flags_win_over_the_file_and_the_rest_comes_from_it() -> None:
    settings = parse_command_line(
        ["--config", str(KOBOLDCPP_FILE), "--port", "7000", "--multiuser", "3"]
    ).settings
    assert settings.port_param == 7000
    assert settings.multiuser == 3
    assert settings.contextsize == 8192  # from the file


def test_positional_kcpps_model_and_port() -> None:
    assert parse_command_line([str(KOBOLDCPP_FILE)]).settings.port_param == 5005
    settings = parse_command_line(["model.gguf", "5002"]).settings
    assert (settings.model_param, settings.port_param) == ("model.gguf", 5002)


def test_defaults_follow_koboldcpp_but_listen_on_loopback() -> None:
    settings = parse_command_line([]).settings
    assert settings.port_param == 5001 and settings.multiuser == 10
    assert settings.defaultgenamt == 1536 and settings.listen_host == "127.0.0.1"
    assert parse_command_line(["--multiuser"]).settings.multiuser == 10  # a bare flag means 10


def test_out_of_range_flag_is_rejected() -> None:
    with pytest.raises(ValidationError):
        parse_command_line(["--parallelrequests", "99"])


def test_pooling_flag_takes_llama_server_s_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_command_line([]).settings.pooling is None  # the model's own
    assert parse_command_line(["--pooling", "last"]).settings.pooling == "last"
    assert serve_main(["--pooling", "max"]) == EXIT_USAGE
    assert "pooling" in capsys.readouterr().err


def test_non_loopback_host_without_password_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="hearth"):
        announce_start(HearthSettings(host="0.0.0.0"), "m")
    assert "without --password" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="hearth"):
        announce_start(HearthSettings(host="0.0.0.0", password="pw"), "m")
        announce_start(HearthSettings(), "m")
    assert "without --password" not in caplog.text
    assert "http://127.0.0.1:5001/api/" in caplog.text


def test_every_bundled_preset_is_valid() -> None:
    presets = sorted((FIXTURES.parent.parent / "presets").glob("*.kcpps"))
    assert presets
    for preset in presets:
        load_kcpps(preset)


def test_every_setting_has_its_flag_with_the_models_default_and_range() -> None:
    """The command line is derived from HearthSettings: a setting cannot be missing from it,
    and its help states the model's own default and range."""
    parser = build_parser()
    assert set(HearthSettings.model_fields) <= {action.dest for action in parser._actions}
    help_text = " ".join(parser.format_help().split())
    for name, field in HearthSettings.model_fields.items():
        if field.annotation is int:
            lower, upper = HearthSettings.bounds(name)
            assert f"(default {field.default}; {lower} to {upper})" in help_text, name
    with pytest.raises(ValidationError):
        parse_command_line(["--contextsize", "128"])  # below the model's minimum


def test_backend_flags_as_koboldcpp_spells_them() -> None:
    assert parse_command_line([]).settings.usevulkan is None
    assert parse_command_line(["--usevulkan"]).settings.usevulkan == []  # every device
    assert parse_command_line(["--usevulkan", "0", "2"]).settings.usevulkan == [0, 2]
    assert parse_command_line(["--usecpu"]).settings.usecpu is True
    cuda = parse_command_line(["--usecuda", "normal", "1", "mmq"]).settings
    assert (cuda.usecuda, cuda.cuda_device) == (["normal", "1", "mmq"], 1)
    assert parse_command_line(["--usecuda"]).settings.cuda_device is None  # every GPU
    with pytest.raises(ValidationError):
        parse_command_line(["--usevulkan", "-1"])
    # KoboldCpp's default: -1, as many layers as fit (autofit)
    assert parse_command_line([]).settings.gpulayers == -1
    assert parse_command_line(["--gpulayers", "12"]).settings.gpulayers == 12


def test_koboldcpp_backend_keys_load_and_save(tmp_path: Path) -> None:
    path = tmp_path / "vulkan.kcpps"
    path.write_text(json.dumps({"usevulkan": [1], "usecpu": False, "gpulayers": 30}))
    settings = load_kcpps(path)
    assert (settings.usevulkan, settings.usecpu, settings.gpulayers) == ([1], False, 30)
    saved = json.loads(save_kcpps(settings, tmp_path / "copy.kcpps").read_text())
    assert (saved["usevulkan"], saved["usecpu"], saved["usecuda"]) == ([1], False, None)
    path.write_text(json.dumps({"usecuda": ["lowvram", "0", "nommq"], "usevulkan": None}))
    settings = load_kcpps(path)
    assert settings.cuda_device == 0
    saved = json.loads(save_kcpps(settings, tmp_path / "copy.kcpps").read_text())
    assert saved["usecuda"] == ["lowvram", "0", "nommq"]


def koboldcpp_file_with(tmp_path: Path, **values: object) -> Path:
    """KoboldCpp's own saved file with `values` changed or added."""
    path = tmp_path / "koboldcpp.kcpps"
    path.write_text(json.dumps({**json.loads(KOBOLDCPP_FILE.read_text()), **values}))
    return path


def test_koboldcpp_smartcache_slots_load_and_both_cache_keys_save(tmp_path: Path) -> None:
    """KoboldCpp has no `cacheram`: its files get Hearth's default; `smartcache` is read as
    written, and a save writes both keys, so Hearth reads back what it wrote."""
    settings = load_kcpps(koboldcpp_file_with(tmp_path, smartcache=5))
    assert (settings.smartcache, settings.cacheram) == (5, DEFAULT_CACHE_RAM_MIB)
    saved = json.loads(save_kcpps(settings, tmp_path / "copy.kcpps").read_text())
    assert (saved["smartcache"], saved["cacheram"]) == (5, DEFAULT_CACHE_RAM_MIB)

    settings.cacheram, settings.smartcache = 512, 3
    written = save_kcpps(settings, tmp_path / "changed.kcpps")
    saved = json.loads(written.read_text())
    assert (saved["cacheram"], saved["smartcache"]) == (512, 3)
    assert (load_kcpps(written).cacheram, load_kcpps(written).smartcache) == (512, 3)
    saved = json.loads(save_kcpps(HearthSettings(), tmp_path / "defaults.kcpps").read_text())
    assert (saved["cacheram"], saved["smartcache"]) == (DEFAULT_CACHE_RAM_MIB, 0)


def test_koboldcpp_smartcache_0_bounds_no_count_and_leaves_the_cache_on(tmp_path: Path) -> None:
    """In KoboldCpp 0 turns SmartCache off; here it only means no count bound (docs/LAUNCHER.md
    says so): the cache stays on, bounded by `cacheram`, which alone turns it off."""
    settings = load_kcpps(koboldcpp_file_with(tmp_path, smartcache=0))
    assert (settings.smartcache, settings.cacheram) == (0, DEFAULT_CACHE_RAM_MIB)
    off = load_kcpps(koboldcpp_file_with(tmp_path, smartcache=0, cacheram=0))
    assert (off.smartcache, off.cacheram) == (0, 0)


@pytest.mark.parametrize(("key", "value"), [("smartcache", -1), ("cacheram", "lots")])
def test_a_bad_cache_key_in_a_file_is_named(tmp_path: Path, key: str, value: object) -> None:
    with pytest.raises(SettingsFileError, match=key):
        load_kcpps(koboldcpp_file_with(tmp_path, **{key: value}))


def test_cache_flags_in_every_spelling_and_a_file_under_them(tmp_path: Path) -> None:
    for spelling in ("--cacheram", "--cache-ram", "-cram"):
        assert parse_command_line([spelling, "256"]).settings.cacheram == 256, spelling
    assert parse_command_line(["--smartcache", "5"]).settings.smartcache == 5
    path = koboldcpp_file_with(tmp_path, smartcache=5, cacheram=1024)
    from_file = parse_command_line(["--config", str(path), "--smartcache", "2"]).settings
    assert (from_file.smartcache, from_file.cacheram) == (2, 1024)  # the flag wins


def test_console_names_the_backend_and_a_vulkan_request_it_cannot_honour(
    caplog: pytest.LogCaptureFixture,
) -> None:
    no_backend = Placement("CPU", (), 0, 19, "this build of llama.cpp has no GPU backend")
    with caplog.at_level("INFO", logger="hearth"):
        announce_start(HearthSettings(usevulkan=[]), "m", placement=no_backend, gpu_backends=())
    assert "no Vulkan backend, so everything runs on the CPU" in caplog.text
    assert "libvulkan-dev" in caplog.text
    assert "Backend: CPU (this build of llama.cpp has no GPU backend)" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="hearth"):
        announce_start(HearthSettings(usecuda=["normal"]), "m", gpu_backends=("Vulkan",))
    assert "--usecuda: this build of llama.cpp has no CUDA backend" in caplog.text
    assert "make install GPU=cuda" in caplog.text
    caplog.clear()
    vulkan = Placement("Vulkan", ("Vulkan0 (Radeon, 7.5 GiB free)",), 10, 19, "--gpulayers 10")
    everything = Placement("Vulkan", ("Vulkan0 (Radeon, 7.5 GiB free)",), 19, 19, "auto")
    cpu = Placement("CPU", (), 0, 19, "--usecpu")
    with caplog.at_level("INFO", logger="hearth"):
        for placement in (vulkan, everything, cpu):
            announce_start(HearthSettings(), "m", placement=placement, gpu_backends=("Vulkan",))
    assert "no Vulkan backend" not in caplog.text
    assert (
        "Backend: Vulkan: 10 of 19 layers on Vulkan0 (Radeon, 7.5 GiB free) (--gpulayers 10)."
        in caplog.text
    )
    assert "Backend: Vulkan: every layer on Vulkan0 (Radeon, 7.5 GiB free) (auto)." in caplog.text
    assert "Backend: CPU (--usecpu)." in caplog.text
