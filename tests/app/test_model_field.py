"""The launcher's model field: a file that is not a usable GGUF is refused beside the field, with
the server's own message, and Launch starts nothing."""

from __future__ import annotations

from pathlib import Path

from app.main_window import MainWindow
from tests.support.gguf_files import copy_head, write_tiny_gguf


def test_non_gguf_model_is_refused_beside_the_field(window: MainWindow, tmp_path: Path) -> None:
    model = tmp_path / "notes.gguf"
    model.write_text("hello, this is not a model\n")
    window.quick.model_path.setText(str(model))
    assert window.read_settings() is None
    assert window.quick.error_text("model_param") == (
        f"{model}: not a GGUF file (it starts with b'hello, t')"
    )
    assert not window.launch()
    assert not window.server.running


def test_truncated_model_is_refused_beside_the_field(window: MainWindow, tmp_path: Path) -> None:
    whole = write_tiny_gguf(tmp_path / "whole.gguf")
    model = copy_head(whole, tmp_path / "cut.gguf", 810)
    window.quick.model_path.setText(str(model))
    assert not window.launch()
    assert window.quick.error_text("model_param").startswith(f"{model}: truncated: ")
    assert not window.server.running


def test_valid_gguf_passes_the_check(window: MainWindow, tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    window.quick.model_path.setText(str(model))
    settings = window.read_settings()
    assert settings is not None and settings.model_param == str(model)
    assert window.quick.error_text("model_param") == ""
