"""The Context tab's memory and speed fields (issue 27): Quantize KV, Use FlashAttention, No KV
Offload, MMAP, mlock, MoE CPU Layers, No BOS Token, Gen Limit and Speculative Decoding, bound
to KoboldCpp's keys (llama-server's spec_type), kept in .kcpps files, handed to the launched
server; and GPU Layers' estimate following Quantize KV and No KV Offload as they change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.tabs.settings_tabs import QuickLaunchTab
from server.devices.listing import ListedDevice
from server.models.files import resolve_model_path
from server.settings.config import HearthSettings
from tests.app.launching import launched_settings

GIB = 2**30
RADEON = ListedDevice("Vulkan", 1, "AMD Radeon RX 7600", "discrete GPU", 7 * GIB, 8 * GIB)


def test_a_koboldcpp_file_s_values_show_and_save_back(window: MainWindow, tmp_path: Path) -> None:
    """KoboldCpp's old Quantize KV number shows as the type it means; saved as its name."""
    saved = tmp_path / "fast.kcpps"
    values = {"quantkv": 1, "noflashattention": True, "lowvram": True, "usemlock": True}
    saved.write_text(json.dumps({**values, "nobostoken": True, "genlimit": 300, "moecpu": 4}))
    assert window.load_file(saved)
    context = window.context
    assert context.quantize_kv.currentText() == "q8_0"
    assert not context.flash_attention.isChecked()  # noflashattention: "Use" unticked
    assert context.low_vram.isChecked() and context.use_mlock.isChecked()
    assert context.no_bos.isChecked() and not context.use_mmap.isChecked()
    assert (context.gen_limit.value(), context.moe_cpu.value()) == (300, 4)
    settings = window.read_settings()
    assert settings is not None
    assert (settings.quantkv, settings.noflashattention, settings.genlimit) == ("q8_0", True, 300)
    assert settings.kv_cache_types == ("q8_0", "q8_0") and settings.kv_in_system_memory


def test_edited_fields_reach_the_launched_server(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = window.context
    assert context.speculation.currentText() == "Off" and context.flash_attention.isChecked()
    context.quantize_kv.setCurrentIndex(context.quantize_kv.findData("q4_0"))
    context.speculation.setCurrentIndex(context.speculation.findData("ngram-simple"))
    context.use_mmap.setChecked(True)
    served = launched_settings(window, monkeypatch)
    assert (served.quantkv, served.spec_type, served.usemmap) == ("q4_0", "ngram-simple", True)


def test_gpu_layers_estimate_follows_the_kv_cache(qtbot: QtBot) -> None:
    """A smaller KV cache needs less of the GPU; one kept in system memory, less still."""
    tab = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings(model_param=str(resolve_model_path(None)), contextsize=32768))
    tab.gpu.set_devices([RADEON])
    tab.gpu_layers.setValue(19)

    def needed() -> int:
        note = tab.gpu_note.text()  # "About 1,589 MiB of 7,168 MiB free"
        return int(note.split()[1].replace(",", ""))

    f16 = needed()
    tab.gpu.set_kv("q8_0", "auto", on_device=True)
    q8 = needed()
    tab.gpu.set_kv("q8_0", "off", on_device=True)  # V stays f16 without flash attention
    q8_k_only = needed()
    tab.gpu.set_kv("q8_0", "auto", on_device=False)
    off_device = needed()
    assert f16 > q8_k_only > q8 > off_device


def test_the_context_tab_s_kv_fields_drive_the_estimate(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's pick on the Context tab reaches GPU Layers' estimate at once."""
    asked: list[tuple[str, str, bool]] = []
    monkeypatch.setattr(window.quick.gpu, "set_kv", lambda *args: asked.append(args))
    context = window.context
    context.quantize_kv.setCurrentIndex(context.quantize_kv.findData("q8_0"))
    context.quantize_kv.activated.emit(context.quantize_kv.currentIndex())  # as a user's pick
    context.low_vram.click()
    context.flash_attention.click()
    assert asked == [("q8_0", "auto", True), ("q8_0", "auto", False), ("q8_0", "off", False)]
