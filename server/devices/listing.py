"""The devices a user can choose, with their memory, as `hearth list-devices` prints them.

The launcher runs this as a child process (a broken GPU driver can crash the process that
probes it; the launcher must survive that) and fills its Backend choice from the JSON. The
Vulkan list comes from the Vulkan loader, so software devices such as lavapipe appear too,
under the index that `--usevulkan` takes; each one's free memory comes from ggml, which is
asked to see every Vulkan device for this one run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from server.devices.vulkan import VulkanDevice


@dataclass(frozen=True)
class ListedDevice:
    backend: str  # "Vulkan", "CUDA", "CPU"
    id: int | None  # the index --usevulkan takes (None for the CPU)
    name: str
    kind: str  # "discrete GPU", "integrated GPU", "CPU", …
    free_bytes: int
    total_bytes: int

    @property
    def is_gpu(self) -> bool:
        """Whether llama.cpp offloads to it unless told otherwise: real GPUs, not a Vulkan
        "CPU" device such as lavapipe (used only when chosen by number)."""
        return self.kind in ("discrete GPU", "integrated GPU", "GPU")

    def line(self) -> str:
        label = f"{self.backend} {self.id}" if self.id is not None else self.backend
        return (
            f"{label}: {self.name} ({self.kind}), {self.free_bytes / 2**30:.1f} GiB free of "
            f"{self.total_bytes / 2**30:.1f} GiB"
        )


class GgmlDevice(Protocol):
    """What the listing reads of one of ggml's devices
    (`server/core/llama/loading/ggml_devices.py`)."""

    @property
    def backend(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def free_bytes(self) -> int: ...
    @property
    def total_bytes(self) -> int: ...


def listed_devices(
    loader_devices: Sequence[VulkanDevice], ggml_devices: Iterable[GgmlDevice]
) -> list[ListedDevice]:
    """ggml's devices under the names and indices the Vulkan loader gives them."""
    listed = []
    vulkan_index = 0
    for device in ggml_devices:
        if device.backend == "Vulkan" and vulkan_index < len(loader_devices):
            known = loader_devices[vulkan_index]
            vulkan_index += 1
            listed.append(
                ListedDevice(
                    "Vulkan",
                    known.index,
                    known.name,
                    known.kind,
                    device.free_bytes,
                    device.total_bytes,
                )
            )
        elif device.backend in ("CUDA", "CPU"):
            number = device.name.removeprefix(device.backend)
            listed.append(
                ListedDevice(
                    device.backend,
                    int(number) if number.isdigit() else None,
                    device.description,
                    device.kind,
                    device.free_bytes,
                    device.total_bytes,
                )
            )
    return listed
