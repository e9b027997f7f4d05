"""The LoRA settings: KoboldCpp's --lora (several files, repeatable as llama-server's) and
--loramult, llama-server's --lora-scaled in both its forms and --lora-init-without-apply, the
.kcpps keys both ways, their fate (applied), and what the core receives: the adapters' files
and the one list of scales the HTTP side changes in place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.core.load_settings import LoraSettings
from server.process.load_settings import load_settings
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from server.settings.kcpps import load_kcpps, read_kcpps_dict, save_kcpps
from server.settings.key_fates import is_applied, not_applied

FULL_PRESET = Path(__file__).resolve().parents[2] / "fixtures" / "koboldcpp-1.116-full.kcpps"


def settings_of(*argv: str) -> HearthSettings:
    return parse_command_line(list(argv)).settings


def test_none_by_default() -> None:
    settings = settings_of()
    assert settings.lora is None and settings.lora_scaled is None
    assert settings.lora_adapters() == [] and settings.lora_scales_now() == []
    assert load_settings(settings).options.lora == LoraSettings()


def test_koboldcpp_s_files_and_mult_and_llama_server_s_repeated_flag() -> None:
    settings = settings_of("--lora", "a.gguf", "b.gguf", "--lora", "c.gguf", "--loramult", "0.5")
    assert settings.lora == ["a.gguf", "b.gguf", "c.gguf"] and settings.loramult == 0.5
    assert settings.lora_adapters() == [("a.gguf", 0.5), ("b.gguf", 0.5), ("c.gguf", 0.5)]
    lora = load_settings(settings).options.lora
    assert lora.paths == ("a.gguf", "b.gguf", "c.gguf") and lora.scales == [0.5, 0.5, 0.5]
    assert settings_of("--lora", "a.gguf").lora_scales_now() == [1.0]  # llama-server's --lora


def test_lora_scaled_in_both_of_llama_server_s_forms_after_the_plain_files() -> None:
    settings = settings_of(
        "--lora-scaled",
        "d.gguf",
        "0.25",
        "--lora-scaled",
        "e.gguf:0.5,f.gguf:-1",
        "--lora",
        "a.gguf",
        "--lora-scaled",
        r"C:\models\g.gguf",
        "2",
    )
    assert settings.lora_scaled == [
        "d.gguf:0.25",
        "e.gguf:0.5",
        "f.gguf:-1.0",
        r"C:\models\g.gguf:2.0",
    ]
    assert settings.lora_adapters() == [
        ("a.gguf", 1.0),
        ("d.gguf", 0.25),
        ("e.gguf", 0.5),
        ("f.gguf", -1.0),
        (r"C:\models\g.gguf", 2.0),
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--lora-scaled", "d.gguf"],
        ["--lora-scaled", "d.gguf", "much"],
        ["--lora-scaled", "d.gguf:inf"],
        ["--loramult", "lots"],
        ["--loramult", "1000"],
    ],
)
def test_a_lora_flag_without_a_usable_scale_is_refused(argv: list[str]) -> None:
    with pytest.raises(ValidationError):
        settings_of(*argv)


def test_init_without_apply_loads_them_at_scale_0() -> None:
    settings = settings_of(
        "--lora", "a.gguf", "--lora-scaled", "b.gguf:2", "--lora-init-without-apply"
    )
    assert settings.lora_adapters() == [("a.gguf", 1.0), ("b.gguf", 2.0)]
    assert settings.lora_scales_now() == [0.0, 0.0]


def test_the_scales_now_are_one_list_shared_with_the_core_and_copies() -> None:
    settings = settings_of("--lora", "a.gguf", "b.gguf")
    scales = settings.lora_scales_now()
    assert load_settings(settings).options.lora.scales is scales
    assert settings.model_copy().lora_scales_now() is scales
    scales[:] = [0.0, 0.75]  # as POST /lora-adapters does
    assert settings.lora_scales_now() == [0.0, 0.75]
    assert load_settings(settings).options.lora.scales == [0.0, 0.75]
    assert settings_of("--lora", "a.gguf", "b.gguf").lora_scales_now() == [1.0, 1.0]


def test_koboldcpp_s_keys_are_read_applied_and_written_back(tmp_path: Path) -> None:
    settings = load_kcpps(FULL_PRESET)
    assert settings.lora == ["/home/ana/models/nemo-storyteller-lora-f16.gguf"]
    assert settings.loramult == 0.8
    assert is_applied("lora") and is_applied("loramult")
    data = read_kcpps_dict(FULL_PRESET)
    assert not {"lora", "loramult"} & {fate.key for fate in not_applied(data)}
    # One path as a string, or none as "" / []: as KoboldCpp saves them.
    one = tmp_path / "one.kcpps"
    one.write_text(json.dumps({"lora": "x.gguf", "loramult": 1.5}))
    assert load_kcpps(one).lora_adapters() == [("x.gguf", 1.5)]
    for empty in ("", [], None):
        one.write_text(json.dumps({"lora": empty}))
        assert load_kcpps(one).lora is None
    saved = tmp_path / "saved.kcpps"
    save_kcpps(settings_of("--lora-scaled", "d.gguf", "0.5", "--lora", "a.gguf"), saved)
    again = load_kcpps(saved)
    assert again.lora_adapters() == [("a.gguf", 1.0), ("d.gguf", 0.5)]


def test_typed_lora_flags_win_over_the_file(tmp_path: Path) -> None:
    preset = tmp_path / "mine.kcpps"
    preset.write_text(json.dumps({"lora": ["file.gguf"], "loramult": 0.3}))
    settings = settings_of("--config", str(preset), "--lora", "typed.gguf")
    assert settings.lora_adapters() == [("typed.gguf", 0.3)]
