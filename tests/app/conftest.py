from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test remembers its preferences in its own folder, never the user's."""
    folder = tmp_path / "config"
    monkeypatch.setenv("HEARTH_CONFIG_DIR", str(folder))
    return folder
