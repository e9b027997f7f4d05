"""The speculative decoding settings: llama-server's --spec-type and size flags, KoboldCpp's
draft keys (and llama-server's spellings of them), .kcpps files both ways, and what the core
receives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.core.load_settings import SpeculationSettings
from server.process.load_settings import load_settings
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from server.settings.kcpps import load_kcpps, save_kcpps


def settings_of(*argv: str) -> HearthSettings:
    return parse_command_line(list(argv)).settings


def test_off_by_default() -> None:
    assert settings_of().spec_type == "none"
    assert load_settings(settings_of()).speculation == SpeculationSettings()


def test_llama_server_s_flags_reach_the_core() -> None:
    settings = settings_of(
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        "8",
        "--spec-ngram-simple-size-m",
        "32",
        "--spec-ngram-mod-n-match",
        "16",
        "--spec-ngram-mod-n-min",
        "4",
        "--spec-ngram-mod-n-max",
        "20",
        "--spec-draft-n-max",
        "12",
        "--spec-draft-n-min",
        "2",
        "-md",
        " small.gguf ",
        "-ngld",
        "10",
        "--draftgpusplit",
        "3,1",
    )
    assert load_settings(settings).speculation == SpeculationSettings(
        kind="ngram-simple",
        ngram_size_n=8,
        ngram_size_m=32,
        mod_n_match=16,
        mod_n_min=4,
        mod_n_max=20,
        draft_max=12,
        draft_min=2,
        draft_model="small.gguf",
        draft_gpu_layers=10,
        draft_gpu_split=(3.0, 1.0),
    )


def test_one_draft_size_under_koboldcpp_s_and_llama_server_s_names() -> None:
    for flag in ("--draftamount", "--spec-draft-n-max", "--draft-max"):
        assert settings_of(flag, "16").draftamount == 16
    assert settings_of().draftamount == 8  # KoboldCpp's default
    assert settings_of("--spec-type", "NGRAM_MOD").spec_type == "ngram-mod"


@pytest.mark.parametrize(
    "argv",
    [
        ["--spec-type", "draft-eagle3"],
        ["--spec-ngram-simple-size-n", "0"],
        ["--spec-ngram-mod-n-max", "2000"],
        ["--draftgpusplit", "a,b"],
    ],
)
def test_values_out_of_range_are_refused(argv: list[str]) -> None:
    with pytest.raises(ValidationError):
        settings_of(*argv)


def test_koboldcpp_s_keys_in_a_kcpps_file_both_ways(tmp_path: Path) -> None:
    written = tmp_path / "draft.kcpps"
    written.write_text(
        json.dumps(
            {
                "draftmodel": "",
                "draftamount": 6,
                "draftgpulayers": 999,
                "draftgpusplit": None,
                "spec_type": "ngram-mod",
            }
        )
    )
    settings = load_kcpps(written)
    assert settings.draftmodel is None  # KoboldCpp writes "" for none
    assert (settings.draftamount, settings.draftgpusplit) == (6, None)
    assert settings.spec_type == "ngram-mod"
    settings.draftgpusplit = [2.0, 1.0]
    again = load_kcpps(save_kcpps(settings, tmp_path / "again.kcpps"))
    assert again.draftgpusplit == [2.0, 1.0]
    assert (again.spec_type, again.draftamount) == ("ngram-mod", 6)
    settings.draftgpusplit = [0, 0]  # KoboldCpp's "not set"
    assert settings.draftgpusplit is None
