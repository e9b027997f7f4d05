"""GPU Layers on a CPU-only build: no "All" where nothing can be offloaded, a reason beside the
field, and the loaded value saved back untouched (a .kcpps from a GPU machine survives)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.tabs.settings_tabs import QuickLaunchTab
from server.config import HearthSettings
from server.gpu_backends import gpu_backends


def test_cpu_only_build_disables_gpu_layers_and_says_why(qtbot: QtBot) -> None:
    tab = QuickLaunchTab(gpu_backends=())
    qtbot.addWidget(tab)
    tab.load(HearthSettings(gpulayers=20))
    assert not tab.gpu_layers.isEnabled()
    assert tab.gpu_layers.text() == "None"  # not "All", and not 20
    assert not tab.gpu_note.isHidden() and "no GPU backend" in tab.gpu_note.text()
    assert "no GPU backend" in tab.gpu_layers.parentWidget().toolTip()
    assert tab.read()["gpulayers"] == 20  # saved back as loaded


def test_gpu_build_keeps_gpu_layers_editable(qtbot: QtBot) -> None:
    tab = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings(gpulayers=-1))
    assert tab.gpu_layers.isEnabled() and tab.gpu_layers.text() == "All"
    assert tab.gpu_note.isHidden()
    assert "Vulkan" in tab.gpu_layers.parentWidget().toolTip()
    tab.gpu_layers.setValue(12)
    assert tab.read()["gpulayers"] == 12


def test_backends_are_read_from_the_library_files(tmp_path: Path) -> None:
    for name in ("libggml-base.so.0", "libggml-cpu.so", "libllama.so"):
        (tmp_path / name).touch()
    assert gpu_backends(tmp_path) == ()
    (tmp_path / "libggml-vulkan.so.0").touch()
    assert gpu_backends(tmp_path) == ("Vulkan",)
    (tmp_path / "ggml-cuda.dll").touch()
    assert gpu_backends(tmp_path) == ("CUDA", "Vulkan")
    assert gpu_backends(tmp_path / "missing") == ()
