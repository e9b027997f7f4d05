"""The `hearth` command (hearth/__main__.py) hands the server's entry the launcher to open;
the server's own entry (`python -m server`) opens none and says how to get it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import app.__main__
from hearth.__main__ import main as hearth_main
from server.process.exit_codes import EXIT_USAGE
from server.process.serve import main as serve_main
from server.settings.config import HearthSettings


def test_hearth_without_a_model_opens_an_empty_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[HearthSettings | None] = []
    monkeypatch.setattr(app.__main__, "run_launcher", lambda s: opened.append(s) or 0)
    assert hearth_main([]) == 0
    assert opened == [None]


def test_hearth_with_showgui_opens_the_launcher_prefilled(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[HearthSettings | None] = []
    monkeypatch.setattr(app.__main__, "run_launcher", lambda s: opened.append(s) or 0)
    assert hearth_main(["--showgui", "--contextsize", "2048", "model.gguf"]) == 0
    (settings,) = opened
    assert settings is not None and settings.contextsize == 2048


def test_the_servers_own_entry_opens_no_launcher(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve_main([]) == EXIT_USAGE
    assert "--skiplauncher" in capsys.readouterr().err


def test_the_servers_entry_loads_no_launcher_and_no_qt() -> None:
    """Imported and run to its usage line in a fresh interpreter: neither `app`, `hearth` nor
    PySide6 was loaded."""
    probe = (
        "import sys; from server.process.serve import main; main([]); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'app', 'hearth', 'PySide6'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
