"""Where the read-only files are found in a source checkout (packaged builds: tests/packaging)."""

from __future__ import annotations

from server.base.bundle import packaged, root_dir


def test_root_dir_is_the_checkout_that_holds_resources_and_presets() -> None:
    assert not packaged()
    root = root_dir()
    assert (root / "resources" / "chat" / "index.html").is_file()
    assert any((root / "presets").glob("*.kcpps"))
    assert (root / "server" / "base" / "bundle.py").is_file()
