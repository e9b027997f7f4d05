"""Backend and GPU Layers on Quick Launch: each Vulkan device listed, Auto with its estimate, the
choice saved as KoboldCpp writes it; on a CPU-only build disabled with a reason, and the loaded
values saved back untouched (a .kcpps from a GPU machine survives)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.tabs.settings_tabs import QuickLaunchTab
from server.devices.backends import gpu_backends
from server.devices.listing import ListedDevice
from server.models.files import resolve_model_path
from server.settings.config import HearthSettings

GIB = 2**30


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
    assert tab.gpu_layers.isEnabled() and tab.gpu_layers.text() == "Auto"  # KoboldCpp's -1
    assert "Vulkan" in tab.gpu_layers.parentWidget().toolTip()
    tab.gpu_layers.setValue(12)
    assert tab.read()["gpulayers"] == 12


LLVMPIPE = ListedDevice("Vulkan", 0, "llvmpipe (LLVM 15.0.6, 256 bits)", "CPU", 2 * GIB, 2 * GIB)
RADEON = ListedDevice("Vulkan", 1, "AMD Radeon RX 7600", "discrete GPU", 7 * GIB, 8 * GIB)
CPU = ListedDevice("CPU", None, "AMD EPYC", "CPU", 20 * GIB, 24 * GIB)


def backend_items(tab: QuickLaunchTab) -> list[str]:
    return [tab.gpu.backend.itemText(i) for i in range(tab.gpu.backend.count())]


def test_backend_lists_each_vulkan_device_and_saves_the_choice(qtbot: QtBot) -> None:
    tab = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings())
    assert backend_items(tab) == ["Auto (every GPU found)", "Use Vulkan (every GPU)", "Use CPU"]
    assert tab.gpu_note.text() == "Looking for GPUs…"
    tab.gpu.set_devices([LLVMPIPE, RADEON, CPU])
    assert backend_items(tab) == [
        "Auto (every GPU found)",
        "Use Vulkan (every GPU)",
        "Use Vulkan: 0: llvmpipe (LLVM 15.0.6, 256 bits), CPU, 2.0 GiB free",
        "Use Vulkan: 1: AMD Radeon RX 7600, 7.0 GiB free",
        "Use CPU",
    ]
    assert tab.read()["usevulkan"] is None and tab.read()["usecpu"] is False
    tab.gpu.backend.setCurrentIndex(2)
    assert (tab.read()["usevulkan"], tab.read()["usecpu"]) == ([0], False)
    tab.gpu.backend.setCurrentIndex(1)
    assert tab.read()["usevulkan"] == []  # KoboldCpp's bare --usevulkan
    tab.gpu.backend.setCurrentIndex(4)
    assert (tab.read()["usevulkan"], tab.read()["usecpu"]) == (None, True)
    assert not tab.gpu_layers.isEnabled()  # nothing to offload on the CPU
    assert tab.gpu_note.text() == "Everything runs on the CPU."
    # Loaded settings select their device, also when the device list arrives later.
    tab.load(HearthSettings(usevulkan=[1]))
    assert tab.gpu.backend.currentText().startswith("Use Vulkan: 1: AMD Radeon")
    fresh = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(fresh)
    fresh.load(HearthSettings(usevulkan=[1]))
    assert fresh.gpu.backend.currentText() == "Use Vulkan: 1 (not found)"
    fresh.gpu.set_devices([LLVMPIPE, RADEON, CPU])
    assert fresh.gpu.backend.currentText().startswith("Use Vulkan: 1: AMD Radeon")
    # A device this machine lacks (a .kcpps from another one) is kept, not dropped.
    fresh.load(HearthSettings(usevulkan=[5]))
    assert fresh.gpu.backend.currentText() == "Use Vulkan: 5 (not found)"
    assert fresh.read()["usevulkan"] == [5]


def test_auto_gpu_layers_shows_the_estimate_for_the_chosen_device(qtbot: QtBot) -> None:
    tab = QuickLaunchTab(gpu_backends=("Vulkan",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings(model_param=str(resolve_model_path(None)), contextsize=4096))
    tab.gpu.set_devices([LLVMPIPE, RADEON, CPU])
    # Auto: the real GPU only (ggml passes over software devices unless chosen)
    assert tab.gpu_note.text().startswith("Auto: 19 of 19 layers, about ")
    assert tab.gpu_note.text().endswith(" of 7,168 MiB free")
    small = ListedDevice("Vulkan", 2, "Small GPU", "integrated GPU", 400 * 2**20, GIB)
    tab.gpu.set_devices([small, CPU])
    note = tab.gpu_note.text()
    fitted = int(note.split()[1])
    assert note.startswith("Auto: ") and 0 < fitted < 19
    tab.gpu_layers.setValue(19)
    assert tab.gpu_note.text().endswith("of 400 MiB free — will not fit")
    tab.gpu.set_devices([LLVMPIPE, CPU])
    tab.gpu_layers.setValue(-1)
    assert tab.gpu_note.text() == "No GPU found: runs on the CPU."
    tab.gpu.backend.setCurrentIndex(tab.gpu.backend.findData("vulkan:0"))
    assert tab.gpu_note.text().startswith("Auto: 19 of 19 layers")  # llvmpipe, chosen


def test_cpu_only_build_keeps_the_loaded_backend(qtbot: QtBot) -> None:
    tab = QuickLaunchTab(gpu_backends=())
    qtbot.addWidget(tab)
    tab.load(HearthSettings(usevulkan=[1], gpulayers=30))
    assert not tab.gpu.backend.isEnabled()
    assert "no GPU backend" in tab.gpu.backend.toolTip()
    assert tab.read()["usevulkan"] == [1] and tab.read()["gpulayers"] == 30


def test_backends_are_read_from_the_library_files(tmp_path: Path) -> None:
    for name in ("libggml-base.so.0", "libggml-cpu.so", "libllama.so"):
        (tmp_path / name).touch()
    assert gpu_backends(tmp_path) == ()
    (tmp_path / "libggml-vulkan.so.0").touch()
    assert gpu_backends(tmp_path) == ("Vulkan",)
    (tmp_path / "ggml-cuda.dll").touch()
    assert gpu_backends(tmp_path) == ("CUDA", "Vulkan")
    assert gpu_backends(tmp_path / "missing") == ()


def test_a_cuda_build_lists_its_devices_and_keeps_koboldcpps_words(qtbot: QtBot) -> None:
    first = ListedDevice("CUDA", 0, "NVIDIA GeForce RTX 4070", "GPU", 11 * GIB, 12 * GIB)
    second = ListedDevice("CUDA", 1, "NVIDIA GeForce RTX 3060", "GPU", 5 * GIB, 6 * GIB)
    tab = QuickLaunchTab(gpu_backends=("CUDA",))
    qtbot.addWidget(tab)
    tab.load(HearthSettings(usecuda=["normal", "1", "mmq"]))
    tab.gpu.set_devices([first, second, CPU])
    assert backend_items(tab) == [
        "Auto (every GPU found)",
        "Use CUDA (every GPU)",
        "Use CUDA: 0: NVIDIA GeForce RTX 4070, 11.0 GiB free",
        "Use CUDA: 1: NVIDIA GeForce RTX 3060, 5.0 GiB free",
        "Use CPU",
    ]
    assert tab.gpu.backend.currentText().startswith("Use CUDA: 1:")
    assert (tab.read()["usecuda"], tab.read()["usevulkan"]) == (["normal", "1", "mmq"], None)
    tab.gpu.backend.setCurrentIndex(tab.gpu.backend.findData("cuda:0"))
    assert tab.read()["usecuda"] == ["normal", "0"]
    assert tab.gpu_note.text().endswith("of 11.0 GiB free")  # the chosen GPU's memory
    tab.gpu.backend.setCurrentIndex(tab.gpu.backend.findData("cuda"))
    assert tab.read()["usecuda"] == ["normal"]
    tab.gpu.backend.setCurrentIndex(tab.gpu.backend.findData("auto"))
    assert tab.read()["usecuda"] is None and tab.read()["usevulkan"] is None
