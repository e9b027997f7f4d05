"""jinja_tools (KoboldCpp's "Jinja for Tools"): on by default in Hearth, off with --nojinjatools
or a .kcpps saying false; a file without the key keeps the default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server.settings.cli import parse_command_line


def kcpps(tmp_path: Path, **keys: object) -> str:
    path = tmp_path / "settings.kcpps"
    path.write_text(json.dumps({"model_param": None, **keys}))
    return str(path)


def test_native_tools_are_the_default_and_nojinjatools_turns_them_off() -> None:
    settings = parse_command_line([]).settings
    assert settings.jinja_tools is True
    assert settings.jinja is False  # the default alone does not claim --jinja
    assert parse_command_line(["--nojinjatools"]).settings.jinja_tools is False


@pytest.mark.parametrize("flag", ["--jinjatools", "--jinja_tools"])
def test_asking_for_jinja_tools_turns_on_jinja_as_in_koboldcpp(flag: str) -> None:
    settings = parse_command_line([flag]).settings
    assert settings.jinja_tools is True and settings.jinja is True


def test_a_koboldcpp_file_says_what_it_means(tmp_path: Path) -> None:
    off = kcpps(tmp_path, jinja_tools=False)  # what KoboldCpp saves unless the box is ticked
    assert parse_command_line(["--config", off]).settings.jinja_tools is False
    typed = parse_command_line(["--config", off, "--jinjatools"]).settings
    assert typed.jinja_tools is True and typed.jinja is True  # a typed flag wins over the file
    on = kcpps(tmp_path, jinja_tools=True)
    assert parse_command_line(["--config", on]).settings.jinja is True
    assert parse_command_line(["--config", on, "--nojinjatools"]).settings.jinja_tools is False
    without = kcpps(tmp_path)  # a file without the key: Hearth's default
    assert parse_command_line(["--config", without]).settings.jinja_tools is True
