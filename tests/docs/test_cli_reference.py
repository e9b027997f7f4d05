"""docs/CLI.md is what tools/cli_reference.py writes from the parsers `hearth` builds.

Fast and model-free: the parsers are built in process, nothing is started.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _cli_reference() -> ModuleType:
    # tools/ is a folder of scripts, not a package: load the script by its path.
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "tools" / "cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_up_to_date() -> None:
    reference = _cli_reference()
    written = (ROOT / "docs" / "CLI.md").read_text(encoding="utf-8")
    assert written == reference.render(), (
        f"docs/CLI.md is stale (the command line changed, or the file was edited by hand): "
        f"regenerate it with `{reference.REGENERATE}`"
    )


def test_cli_reference_names_every_flag() -> None:
    from server.settings.cli import build_parser

    written = (ROOT / "docs" / "CLI.md").read_text(encoding="utf-8")
    flags = [flag for action in build_parser()._actions for flag in action.option_strings]
    assert "--launch" in flags
    missing = [flag for flag in flags if f"`{flag}`" not in written]
    assert not missing, f"docs/CLI.md lacks {missing}"
