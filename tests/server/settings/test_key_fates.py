"""Every key of a KoboldCpp 1.116 `.kcpps` is applied or named, once, as not applied and why."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from server.process import serve as serve_command
from server.process.exit_codes import EXIT_USAGE
from server.settings.config import HearthSettings
from server.settings.kcpps import load_kcpps, read_kcpps_dict
from server.settings.key_fates import (
    NOT_APPLIED,
    NOT_YET_APPLIED,
    READ_AS,
    UNKNOWN,
    describe,
    not_applied,
    not_applied_lines,
    reason_not_applied,
)
from tests.support.servers import free_port

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FULL_PRESET = FIXTURES / "koboldcpp-1.116-full.kcpps"
SAVED_BY_KOBOLDCPP = FIXTURES / "koboldcpp-saved.kcpps"

# The full preset sets every key away from KoboldCpp's default, except where two keys exclude
# each other (KoboldCpp's own mutually exclusive flags): these stay at the default.
AT_DEFAULT = {"sdquant", "sdvaeauto", "noblas", "nommap", "rpcport", "istemplate"}
# Saved beside the key Hearth reads, which the preset sets too.
SUPERSEDED = {"model", "port"}


def keys_named(items: list[str]) -> list[str]:
    """The keys of `describe`'s "key, key (reason)" items."""
    return [key for item in items for key in item.split(" (", 1)[0].split(", ")]


def test_every_key_of_the_full_preset_has_exactly_one_fate() -> None:
    data = read_kcpps_dict(FULL_PRESET)
    assert len(data) == 169  # KoboldCpp 1.116's argparse destinations and istemplate
    for key in data:
        known = key in HearthSettings.model_fields or key in READ_AS
        applied = known and key not in NOT_YET_APPLIED
        reason = NOT_APPLIED.get(key) or NOT_YET_APPLIED.get(key)
        assert applied != (reason is not None), key
        assert reason_not_applied(key) == reason
        assert reason is None or reason.strip(), key
    assert not NOT_APPLIED.keys() & HearthSettings.model_fields.keys()
    assert not NOT_APPLIED.keys() & READ_AS.keys()
    assert set(READ_AS.values()) <= HearthSettings.model_fields.keys()
    # the preset covers issue 27's speed and memory keys, which Hearth applies
    assert data.keys() >= {"quantkv", "noflashattention", "ropeconfig", "genlimit"}
    # settings Hearth keeps but does not act on yet are named, not applied
    assert NOT_YET_APPLIED.keys() <= HearthSettings.model_fields.keys() & data.keys()
    # the draft model's keys are applied (speculation from a draft model)
    assert all(
        reason_not_applied(key) is None
        for key in ("draftmodel", "draftamount", "draftgpulayers", "draftgpusplit")
    )


def test_the_full_preset_reports_each_key_it_sets_once() -> None:
    data = read_kcpps_dict(FULL_PRESET)
    fates = not_applied(data)
    keys = [fate.key for fate in fates]
    named = NOT_APPLIED.keys() | NOT_YET_APPLIED.keys()
    expected = {key for key in data if key in named} - AT_DEFAULT - SUPERSEDED
    assert not {"draftmodel", "draftamount", "draftgpulayers"} & set(keys)
    assert len(keys) == len(set(keys)) and set(keys) == expected
    assert UNKNOWN not in {fate.reason for fate in fates}
    assert sorted(keys_named(describe(fates))) == sorted(keys)  # each named once
    heading, *lines = not_applied_lines(fates, FULL_PRESET.name)
    assert heading == f"Not applied by Hearth (from {FULL_PRESET.name}):"
    assert max(len(line) for line in lines) <= 100  # long items wrap, losing nothing:
    assert " ".join(line.strip() for line in lines) == " ".join(describe(fates))


def test_a_file_koboldcpp_saved_at_its_defaults_reports_nothing() -> None:
    # It saves sdmodel "", remotetunnel false, chatcompletionsadapter "AutoGuess", …
    data = read_kcpps_dict(SAVED_BY_KOBOLDCPP)
    assert not_applied(data) == []
    assert not_applied_lines(not_applied(load_kcpps(SAVED_BY_KOBOLDCPP).model_dump())) == []


@pytest.mark.parametrize(
    ("key", "value", "reported"),
    [
        ("sdmodel", "", False),
        ("sdmodel", None, False),
        ("sdmodel", "flux.gguf", True),
        ("remotetunnel", False, False),
        ("remotetunnel", True, True),
        ("visionmaxres", 1024, False),
        ("visionmaxres", 2048, True),
        ("sdloramult", [1.0], False),
        ("sdloramult", [0.5], True),
        ("maingpu", -1, False),
        ("maingpu", 0, True),  # GPU 0 is a choice, not "unset"
        ("nocertify", False, False),
        ("nocertify", True, True),
        ("chatcompletionsadapter", "AutoGuess", False),
    ],
)
def test_a_key_at_koboldcpps_default_sets_nothing(key: str, value: Any, reported: bool) -> None:
    assert bool(not_applied({key: value})) is reported


def test_keys_saved_beside_the_one_hearth_reads() -> None:
    url = "https://huggingface.co/owner/repo/resolve/main/model.gguf"
    assert not_applied({"model": [url], "model_param": url}) == []
    assert [fate.key for fate in not_applied({"model": [url], "model_param": ""})] == ["model"]
    assert not_applied({"port": 5002, "port_param": 5002}) == []
    assert [fate.key for fate in not_applied({"port": 5002, "port_param": 5001})] == ["port"]
    assert not_applied({"blasbatchsize": 256, "batchsize": 1024}) == []


def test_keys_nobody_knows_are_named_even_when_false() -> None:
    # A misspelt setting ("jinja_tool") is worth a word whatever its value.
    fates = not_applied({"jinja_tool": False, "threads": 4, "mycolour": "blue"})
    assert [(fate.key, fate.reason) for fate in fates] == [
        ("jinja_tool", UNKNOWN),
        ("mycolour", UNKNOWN),
    ]


def test_few_reasons_make_one_line_many_a_line_each() -> None:
    fates = not_applied({"sdmodel": "flux.gguf", "remotetunnel": True, "ttsmodel": "tts.gguf"})
    assert describe(fates) == [
        "sdmodel, ttsmodel (Hearth serves text models only)",
        "remotetunnel (no Cloudflare tunnel: use deploy/ nginx or your own)",
    ]
    assert not_applied_lines(fates, "my.kcpps") == [
        "Not applied by Hearth (from my.kcpps): sdmodel, ttsmodel (Hearth serves text models "
        "only); remotetunnel (no Cloudflare tunnel: use deploy/ nginx or your own)."
    ]
    more = not_applied({"sdmodel": "flux.gguf", "remotetunnel": True, "odd": 1})
    assert not_applied_lines(more, "my.kcpps") == [
        "Not applied by Hearth (from my.kcpps):",
        "  sdmodel (Hearth serves text models only)",
        "  remotetunnel (no Cloudflare tunnel: use deploy/ nginx or your own)",
        f"  odd ({UNKNOWN})",
    ]
    assert not_applied_lines([], "my.kcpps") == []


def test_the_full_preset_loads_and_keeps_every_key() -> None:
    saved = load_kcpps(FULL_PRESET).to_kcpps()
    assert json.loads(FULL_PRESET.read_text()).keys() <= saved.keys()


def test_serving_from_the_preset_names_what_is_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Through `hearth --config`: the lines come before the model is even looked for (here it
    is missing, so the start ends there, quickly)."""
    data = json.loads(FULL_PRESET.read_text())
    missing = tmp_path / "missing.gguf"
    # What must not stop the start before the model: a host and port of this machine, and no
    # other file to look for first.
    data.update(host="", port_param=free_port(), model_param=str(missing), model=[])
    # Its files are not on this machine: the certificate check would stop the start first.
    data.update(jinjatemplate="", draftmodel="", embeddingsmodel="", skiplauncher=True, ssl=None)
    data.update(preloadstory=None, savedatafile=None)
    preset = tmp_path / "my.kcpps"
    preset.write_text(json.dumps(data))
    # The real console handler would be added to the root logger once per call; caplog reads.
    monkeypatch.setattr(serve_command, "setup_console_logging", lambda: None)
    caplog.set_level(logging.INFO, logger="hearth")

    assert serve_command.main(["--config", str(preset)]) == EXIT_USAGE

    lines = [record.getMessage() for record in caplog.records]
    fates = not_applied(load_kcpps(preset).model_dump())
    assert lines[:-1] == not_applied_lines(fates, "my.kcpps")
    assert "  remotetunnel (no Cloudflare tunnel: use deploy/ nginx or your own)" in lines
    assert str(missing) in lines[-1]  # then the start went on, to the missing model
    named = keys_named(describe(fates))
    assert {"sdmodel", "visionmaxres", "remotetunnel"} <= set(named)
    assert not {"lora", "loramult"} & set(named)  # applied (issue 27)
    assert not {"mmproj", "mmprojcpu", "visionmaxtokens"} & set(named)  # applied (issue 28)
    assert "model" not in named  # model_param is the key Hearth reads
