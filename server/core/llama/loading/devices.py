"""Choosing the devices llama.cpp will use and planning where a model's layers go.

ggml's registry (`ggml_devices.py`) is built on first use and reads the device-selection
environment then, so `choose_devices` must run before the model loads.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path

from server.core.llama.loading.ggml_devices import ggml_devices
from server.core.llama.loading.rpc import register_workers
from server.core.load_settings import LoadSettings
from server.core.scheduling.engine import EngineError
from server.devices.placement import Placement
from server.devices.rpc_endpoints import RpcAddressError, worker_endpoints
from server.devices.vulkan import vulkan_devices
from server.models.gguf import gguf_summary
from server.models.memory import (
    KvCacheLayout,
    auto_gpu_layers,
    estimate_memory,
    kv_cache_layout,
    mib,
)


def choose_devices(settings: LoadSettings) -> None:
    """Make ggml see only the devices the user chose; before anything touches the registry.

    `--usevulkan 1 2` → GGML_VK_VISIBLE_DEVICES=1,2 (the Vulkan loader's indices, which
    `hearth list-devices` shows); `--usevulkan` alone keeps ggml's default (every GPU);
    `--usecuda normal 1` → CUDA_VISIBLE_DEVICES=1. Choosing one backend hides the other's
    devices (a build rarely has both). `--usecpu` hides every GPU, so not even the prompt's
    matrix products are offloaded to one. A variable the user set in the environment is
    respected when no flag says otherwise.
    """
    if settings.usecpu:
        os.environ["GGML_VK_VISIBLE_DEVICES"] = ""
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        return
    if settings.usevulkan is not None and settings.usecuda is None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if settings.usecuda is not None and settings.usevulkan is None:
        os.environ["GGML_VK_VISIBLE_DEVICES"] = ""
    if settings.usevulkan:
        ids = ",".join(str(index) for index in settings.usevulkan)
        os.environ["GGML_VK_VISIBLE_DEVICES"] = ids
    if settings.cuda_device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(settings.cuda_device)


def plan_placement(settings: LoadSettings, path: Path, gpu_backends: Sequence[str]) -> Placement:
    """Choose the devices and the number of offloaded layers; before the model loads.

    `--gpulayers -1` (the default, KoboldCpp's autofit) offloads as many layers as the GGUF
    header's estimate fits in the chosen GPUs' free memory; a count is taken as given."""
    if settings.usevulkan:
        _check_vulkan_ids(settings.usevulkan)
    choose_devices(settings)
    batch = settings.batch_size
    options = settings.options  # the KV cache's type and place change what fits
    kv, _ = kv_cache_layout(
        options.cache_type_k, options.cache_type_v, options.flash_attention, options.offload_kv
    )
    estimate = estimate_memory(gguf_summary(path), settings.contextsize, batch, kv)
    total = estimate.all_layers
    if settings.usecpu:
        return Placement("CPU", (), 0, total, "--usecpu")
    if settings.rpc:
        # Imported here: rpc.py builds on this module's device functions.
        try:
            endpoints = worker_endpoints(settings.rpc)
        except RpcAddressError as exc:
            raise EngineError(str(exc)) from exc
        register_workers(endpoints)
    elif not gpu_backends:
        return Placement("CPU", (), 0, total, "this build of llama.cpp has no GPU backend")
    # llama.cpp's order: RPC workers' devices first, then this machine's GPUs.
    gpus = sorted(
        (device for device in ggml_devices() if device.takes_layers),
        key=lambda device: device.backend != "RPC",
    )
    if not gpus:
        return Placement("CPU", (), 0, total, _no_gpu_reason())
    if settings.gpulayers >= 0:
        layers, reason = min(settings.gpulayers, total), f"--gpulayers {settings.gpulayers}"
    else:
        beside = room_beside(settings, path, kv)
        free = max(sum(device.free_bytes for device in gpus) - beside, 0)
        layers = auto_gpu_layers(estimate, free)
        reason = (
            f"auto: about {mib(estimate.device_bytes(layers))} of {mib(free)} free "
            f"for a {settings.contextsize}-token context"
        ) + (f", {mib(beside)} kept for the draft model and projector" if beside else "")
    backend = "+".join(dict.fromkeys(device.backend for device in gpus))
    summaries = [device.summary() for device in gpus]
    if len(gpus) > 1:  # say which device holds what
        shares = list(settings.tensor_split or []) or [float(device.free_bytes) for device in gpus]
        held = layers_per_device(shares, len(gpus), layers, total - 1)
        summaries = [f"{summary}: {what}" for summary, what in zip(summaries, held, strict=True)]
    return Placement(backend, tuple(summaries), layers, total, reason)


def room_beside(settings: LoadSettings, path: Path, kv: KvCacheLayout) -> int:
    """Device bytes what loads beside the model will take, which Auto GPU layers leaves free:
    the projector's weights (on the GPU unless --mmprojcpu) and the draft model at its own
    GPU layers, with its KV cache of the same context and type."""
    media, spec = settings.media, settings.speculation
    total = 0
    projector = Path(media.projector).expanduser() if media.projector else None
    mine = media.for_model is None or Path(media.for_model).resolve() == path.resolve()
    if projector is not None and mine and not media.on_cpu and projector.is_file():
        total += projector.stat().st_size
    draft = Path(spec.draft_model).expanduser() if spec.draft_model else None
    if draft is not None and draft.is_file() and spec.draft_gpu_layers != 0:
        estimate = estimate_memory(
            gguf_summary(draft), settings.contextsize, settings.batch_size, kv
        )
        layers = estimate.all_layers if spec.draft_gpu_layers < 0 else spec.draft_gpu_layers
        total += estimate.device_bytes(min(layers, estimate.all_layers))
    return total


def layers_per_device(
    shares: Sequence[float], devices: int, gpu_layers: int, repeating_layers: int
) -> list[str]:
    """What each device holds, by llama.cpp's rule (llama-model.cpp `load_tensors`): the
    offloaded layers (the last `gpu_layers` of the repeating layers, then the output layer)
    go to devices by the cumulative, normalized shares (free memory, or --tensorsplit)."""
    padded = [*list(shares)[:devices], *[0.0] * max(0, devices - len(shares))]
    if not any(padded):
        padded = [1.0] * devices
    bounds, running = [], 0.0
    for share in padded:
        running += share
        bounds.append(running)
    bounds = [bound / running for bound in bounds]
    first = max(repeating_layers - gpu_layers, 0)
    offloaded = min(gpu_layers, repeating_layers + 1)
    counts, output = [0] * devices, None
    for layer in range(first, repeating_layers + 1):
        if layer - first >= offloaded:
            break
        index = min(bisect_right(bounds, (layer - first) / offloaded), devices - 1)
        if layer == repeating_layers:
            output = index
        else:
            counts[index] += 1
    return [
        f"{count} layers" + (" and the output layer" if index == output else "")
        for index, count in enumerate(counts)
    ]


def _check_vulkan_ids(ids: Sequence[int]) -> None:
    """ggml aborts on an index the Vulkan loader does not have: refuse it clearly first."""
    devices = vulkan_devices()
    wrong = [index for index in ids if index >= len(devices)]
    if wrong:
        listed = "; ".join(f"{d.index}: {d.name}" for d in devices) or "none"
        raise EngineError(
            f"--usevulkan {' '.join(map(str, wrong))}: no such Vulkan device (this machine "
            f"has: {listed})"
        )


def _no_gpu_reason() -> str:
    software = [d for d in vulkan_devices() if not d.is_gpu]
    if software:
        # ggml passes over CPU-type Vulkan devices unless asked for them by index
        first = software[0]
        return (
            f"no Vulkan GPU found; {first.name} is a software device, used only when chosen: "
            f"--usevulkan {first.index}"
        )
    return "no GPU found"
