"""What loading a model reads from the settings, as a plain frozen dataclass.

The core never sees the settings model (pydantic, the launcher's too): the running process
builds this from `HearthSettings` at the edge (`server/process/load_settings.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from server.base.defaults import DEFAULT_BATCH, default_thread_count


@dataclass(frozen=True)
class LoadSettings:
    contextsize: int = 4096
    batch_size: int = DEFAULT_BATCH
    thread_count: int = field(default_factory=default_thread_count)
    parallelrequests: int = 1
    gpulayers: int = -1  # -1: as many as fit (auto)
    usecpu: bool = False
    usevulkan: tuple[int, ...] | None = None  # Vulkan device indices; () means the default
    usecuda: tuple[str, ...] | None = None  # KoboldCpp's words after --usecuda
    cuda_device: int | None = None
    rpc: str | None = None  # RPC worker addresses, comma-separated
    tensor_split: tuple[float, ...] | None = None
    noshift: bool = False
    nofastforward: bool = False
