"""Quick Launch's Backend choice and GPU Layers field, KoboldCpp's way.

Backend: Use CPU, Use Vulkan (every GPU), or one Vulkan device by name and free memory (the
list comes from `hearth list-devices`, run by app.device_probe; until it answers only the
general choices show). GPU Layers: Auto (-1, KoboldCpp's autofit) or a count, with the memory
estimate for the chosen model (and its draft model and projector), context and device beside
it. On a build without a GPU backend both are disabled and say why, and the loaded values are
saved back untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from app.model_info import describe_projector
from app.tabs.fields import spin_box
from server.base.defaults import DEFAULT_BATCH
from server.devices.backends import GPU_BUILD_HINT
from server.devices.listing import ListedDevice
from server.models.memory import (
    KvCacheLayout,
    MemoryEstimate,
    auto_gpu_layers,
    estimate_memory,
    kv_cache_layout,
    mib,
)
from server.settings.config import HearthSettings

AUTO_BACKEND = "auto"  # no flag: llama.cpp uses every GPU it finds
CPU_BACKEND = "cpu"
EVERY_VULKAN = "vulkan"
EVERY_CUDA = "cuda"


def backend_key(settings: HearthSettings) -> str:
    if settings.usecpu:
        return CPU_BACKEND
    if settings.usecuda is not None:
        device = settings.cuda_device
        return EVERY_CUDA if device is None else f"cuda:{device}"
    if settings.usevulkan is None:
        return AUTO_BACKEND
    if len(settings.usevulkan) == 1:
        return f"vulkan:{settings.usevulkan[0]}"
    if settings.usevulkan:  # several ids: kept as given
        return "vulkan:" + ",".join(map(str, settings.usevulkan))
    return EVERY_VULKAN


def setting_file(text: str | None) -> Path | None:
    """The file a settings value names (the draft model, the projector; None when unset)."""
    text = (text or "").strip()
    return Path(text).expanduser() if text else None


def draft_device_bytes(draft: MemoryEstimate, gpu_layers: int) -> int:
    """The device memory of a draft model with `gpu_layers` of it offloaded (KoboldCpp's
    draftgpulayers: 999, its default, is all of them; -1, auto, is taken as all too, since a
    draft model is small): its weights, its KV cache for the same context and type as the
    model's (none with --lowvram) and its own compute buffer, as for the model itself."""
    return draft.device_bytes(draft.all_layers if gpu_layers < 0 else gpu_layers)


def _estimate(model: Path, context: int, kv: KvCacheLayout) -> MemoryEstimate | None:
    """The model's estimate, or None when its file cannot be read (the field says why)."""
    try:
        from server.models.gguf import gguf_summary

        return estimate_memory(gguf_summary(model), context, DEFAULT_BATCH, kv)
    except (OSError, ValueError):
        return None


def _shares(draft: int, projector: int) -> str:
    """The estimate's parts besides the model, as " (draft model: 250 MiB, projector: …)"."""
    parts = [
        f"{name}: {mib(size)}"
        for name, size in (("draft model", draft), ("projector", projector))
        if size
    ]
    return f" ({', '.join(parts)})" if parts else ""


class GpuFields(QObject):
    """The widgets of the two rows and the logic between them."""

    changed = Signal()

    def __init__(self, gpu_backends: tuple[str, ...], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.backends = gpu_backends
        self.has_gpu = bool(gpu_backends)
        self.backend = QComboBox()
        self.gpu_layers = spin_box("gpulayers", special="Auto" if self.has_gpu else "None")
        self.note = QLabel("" if self.has_gpu else "CPU-only build: no GPU backend")
        self.note.setWordWrap(True)
        self.note.setEnabled(False)  # greyed, as a hint
        self.devices: list[ListedDevice] = []
        self._probe_failure = ""
        self._kept_layers = self.gpu_layers.value()
        self._kept_backend = AUTO_BACKEND
        self._kept_cuda_words: list[str] | None = None
        self._model: Path | None = None
        self._context = 4096
        self._kv = KvCacheLayout()  # the loaded settings' KV cache type and place
        self._draft: Path | None = None  # the draft model (Loaded Files) and its GPU layers
        self._draft_layers = 999
        self._projector: Path | None = None  # the projector (Loaded Files) and its place
        self._projector_cpu = False
        self._fill_backends(AUTO_BACKEND)
        if not self.has_gpu:
            # A CPU-only build offloads nothing, whatever the fields say: show that.
            self.backend.setEnabled(False)
            self.gpu_layers.setEnabled(False)
        self.backend.currentIndexChanged.connect(self._update)
        self.gpu_layers.valueChanged.connect(self._update)

    def layers_row(self) -> QWidget:
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.gpu_layers)
        layout.addWidget(self.note, 1)
        return row

    @property
    def backend_tip(self) -> str:
        if not self.has_gpu:
            return f"Disabled: this build of llama.cpp has no GPU backend. {GPU_BUILD_HINT}"
        return (
            "Where the model runs. Auto: every GPU llama.cpp finds. A Vulkan device by its "
            "number (as `hearth list-devices` shows it), also a software one such as llvmpipe. "
            "Use CPU: no GPU at all."
        )

    @property
    def layers_tip(self) -> str:
        if not self.has_gpu:
            return (
                f"Disabled: this build of llama.cpp has no GPU backend, so everything runs on "
                f"the CPU. {GPU_BUILD_HINT} The saved value is kept for other builds."
            )
        return (
            f"Model layers to offload to the GPU ({', '.join(self.backends)} in this build). "
            "Auto fits as many as the device's free memory allows for this context (an "
            "estimate: set a number yourself if loading fails); 0 keeps everything on the CPU."
        )

    # -- settings both ways -------------------------------------------------------------

    def load(self, settings: HearthSettings) -> None:
        self._kept_layers = settings.gpulayers
        self._kept_backend = backend_key(settings)
        self._kept_cuda_words = settings.usecuda
        type_k, type_v = settings.kv_cache_types
        on_device = not settings.kv_in_system_memory
        self._kv, _ = kv_cache_layout(type_k, type_v, settings.flash_attention, on_device)
        self._draft, self._draft_layers = setting_file(settings.draftmodel), settings.draftgpulayers
        self._projector, self._projector_cpu = setting_file(settings.mmproj), settings.mmprojcpu
        self._fill_backends(self._kept_backend)
        self.gpu_layers.setValue(settings.gpulayers if self.has_gpu else -1)
        self._update()

    def read(self) -> dict[str, Any]:
        if not self.has_gpu:
            key, layers = self._kept_backend, self._kept_layers
        else:
            key, layers = self.backend.currentData(), self.gpu_layers.value()
        usevulkan: list[int] | None = None
        usecuda: list[str] | None = None
        if key == EVERY_VULKAN:
            usevulkan = []
        elif key.startswith("vulkan:"):
            usevulkan = [int(index) for index in key.removeprefix("vulkan:").split(",")]
        elif key == self._kept_backend and self._kept_cuda_words is not None:
            usecuda = self._kept_cuda_words  # KoboldCpp's other words (mmq, …) kept as written
        elif key == EVERY_CUDA:
            usecuda = ["normal"]
        elif key.startswith("cuda:"):
            usecuda = ["normal", key.removeprefix("cuda:")]
        return {
            "usecpu": key == CPU_BACKEND,
            "usevulkan": usevulkan,
            "usecuda": usecuda,
            "gpulayers": layers,
        }

    # -- devices and the estimate ------------------------------------------------------

    def set_devices(self, devices: Sequence[ListedDevice]) -> None:
        """The probe's answer: list each Vulkan device, keeping the current choice."""
        self.devices = list(devices)
        self._fill_backends(self.backend.currentData() or self._kept_backend)
        self._update()

    def show_probe_failure(self, reason: str) -> None:
        self._probe_failure = reason
        self._update()

    def set_kv(self, kv_type: str, flash_attention: str, on_device: bool) -> None:
        """The KV cache as the Context tab says now (Quantize KV, FlashAttention, No KV
        Offload): the estimate and Auto follow it before the settings are saved."""
        self._kv, _ = kv_cache_layout(kv_type, kv_type, flash_attention, on_device)
        self._update()

    def set_draft(self, model: Path | None, gpu_layers: int) -> None:
        """The draft model and its GPU layers as the Loaded Files tab says now."""
        self._draft, self._draft_layers = model, gpu_layers
        self._update()

    def set_projector(self, projector: Path | None, on_cpu: bool) -> None:
        """The projector and Projector on CPU as the Loaded Files tab says now."""
        self._projector, self._projector_cpu = projector, on_cpu
        self._update()

    def set_model(self, model: Path | None, context: int) -> None:
        self._model, self._context = model, context
        self._update()

    def _fill_backends(self, selected: str) -> None:
        self.backend.blockSignals(True)
        self.backend.clear()
        if self.has_gpu:
            self.backend.addItem("Auto (every GPU found)", AUTO_BACKEND)
        for backend, every in (("CUDA", EVERY_CUDA), ("Vulkan", EVERY_VULKAN)):
            if backend not in self.backends:
                continue
            self.backend.addItem(f"Use {backend} (every GPU)", every)
            for device in self.devices:
                if device.backend == backend:
                    software = "" if device.is_gpu else f", {device.kind}"
                    self.backend.addItem(
                        f"Use {backend}: {device.id}: {device.name}{software}, "
                        f"{device.free_bytes / 2**30:.1f} GiB free",
                        f"{every}:{device.id}",
                    )
        self.backend.addItem("Use CPU", CPU_BACKEND)
        index = self.backend.findData(selected)
        if index < 0 and ":" in selected:
            # a device from another machine's settings: kept, and shown as not found
            backend, _, ids = selected.partition(":")
            name = "CUDA" if backend == EVERY_CUDA else "Vulkan"
            self.backend.addItem(f"Use {name}: {ids} (not found)", selected)
            index = self.backend.count() - 1
        self.backend.setCurrentIndex(max(index, 0))
        self.backend.blockSignals(False)

    def chosen_gpus(self) -> list[ListedDevice]:
        key = self.backend.currentData() or AUTO_BACKEND
        if key == CPU_BACKEND:
            return []
        if key in (EVERY_CUDA, EVERY_VULKAN):
            backend = "CUDA" if key == EVERY_CUDA else "Vulkan"
            return [d for d in self.devices if d.backend == backend and d.is_gpu]
        if ":" in key:
            every, _, listed = key.partition(":")
            backend = "CUDA" if every == EVERY_CUDA else "Vulkan"
            ids = {int(index) for index in listed.split(",")}
            return [d for d in self.devices if d.backend == backend and d.id in ids]
        # ggml's default: real GPUs only (software devices only when chosen by number)
        return [d for d in self.devices if d.is_gpu]

    def estimate_text(self) -> str:
        if not self.has_gpu:
            return "CPU-only build: no GPU backend"
        if self.backend.currentData() == CPU_BACKEND:
            return "Everything runs on the CPU."
        if not self.devices:
            return (
                f"Devices unknown: {self._probe_failure}"
                if self._probe_failure
                else ("Looking for GPUs…")
            )
        gpus = self.chosen_gpus()
        if not gpus:
            return "No GPU found: runs on the CPU."
        if self._model is None:
            return ""
        estimate = _estimate(self._model, self._context, self._kv)
        if estimate is None:
            return ""  # the model field says what is wrong with the file
        draft, projector = self.draft_bytes(), self.projector_bytes()
        free = sum(device.free_bytes for device in gpus)
        layers = self.gpu_layers.value()
        if layers < 0:
            layers = auto_gpu_layers(estimate, free - draft - projector)
        # llama.cpp puts the projector on the GPU only when the model has layers there.
        projector = projector if layers > 0 else 0
        needed = estimate.device_bytes(layers) + draft + projector
        shares = _shares(draft, projector)
        if self.gpu_layers.value() < 0:
            return (
                f"Auto: {layers} of {estimate.all_layers} layers, about "
                f"{mib(needed)} of {mib(free)} free{shares}"
            )
        fits = "" if needed <= free else " — will not fit"
        return f"About {mib(needed)} of {mib(free)} free{shares}{fits}"

    def draft_bytes(self) -> int:
        """The draft model's device memory (0 without one, or when its file cannot be read)."""
        if self._draft is None or not self._draft.is_file():
            return 0
        draft = _estimate(self._draft, self._context, self._kv)
        return 0 if draft is None else draft_device_bytes(draft, self._draft_layers)

    def projector_bytes(self) -> int:
        """The projector's device memory, its weights (0 without one, with Projector on CPU, or
        when the file is not a usable projector: the Loaded Files tab says why)."""
        if self._projector is None or self._projector_cpu:
            return 0
        return describe_projector(self._projector).file_size

    def _update(self) -> None:
        if self.has_gpu:
            on_cpu = self.backend.currentData() == CPU_BACKEND
            self.gpu_layers.setEnabled(not on_cpu)
            self.note.setText(self.estimate_text())
        self.changed.emit()
