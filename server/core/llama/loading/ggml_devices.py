"""ggml's device registry, read through ctypes: every device with its kind and memory.

llama-cpp-python does not bind ggml's device API (`ggml_backend_dev_*`), so it is bound here
with ctypes on the copies of libggml / libggml-base that libllama already mapped (see
`native.shared_library`).

Shared by placement (`devices.py`), the RPC backend (`rpc.py`) and `hearth list-devices`.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from server.core.llama.loading.native import shared_library

# enum ggml_backend_dev_type (ggml-backend.h)
_DEVICE_KINDS = {0: "CPU", 1: "GPU", 2: "integrated GPU", 3: "accelerator", 4: "meta"}


@dataclass(frozen=True)
class Device:
    """One ggml device: `Vulkan0`, `CUDA0`, `CPU`, an RPC worker…"""

    backend: str  # the registry's name: "Vulkan", "CUDA", "CPU", "RPC", …
    name: str  # ggml's device name: "Vulkan0"
    description: str  # "NVIDIA GeForce RTX 4070", "llvmpipe (LLVM 15.0.6, 256 bits)"
    kind: str  # one of _DEVICE_KINDS' values
    free_bytes: int
    total_bytes: int

    @property
    def takes_layers(self) -> bool:
        """Whether llama.cpp offloads layers to it (GPUs; not the CPU or its accelerators)."""
        return self.kind in ("GPU", "integrated GPU")

    def summary(self) -> str:
        return f"{self.name} ({self.description}, {self.free_bytes / 2**30:.1f} GiB free)"


def device_api() -> tuple[Any, Any]:
    """libggml and libggml-base with ggml's device functions declared."""
    ggml = ctypes.CDLL(str(shared_library("ggml")))
    base = ctypes.CDLL(str(shared_library("ggml-base")))
    ggml.ggml_backend_dev_count.argtypes, ggml.ggml_backend_dev_count.restype = [], ctypes.c_size_t
    ggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    ggml.ggml_backend_dev_get.restype = ctypes.c_void_p
    for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(base, name).argtypes = [ctypes.c_void_p]
        getattr(base, name).restype = ctypes.c_char_p
    base.ggml_backend_dev_type.argtypes, base.ggml_backend_dev_type.restype = (
        [ctypes.c_void_p],
        ctypes.c_int,
    )
    base.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    base.ggml_backend_dev_memory.restype = None
    base.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    base.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    base.ggml_backend_reg_name.argtypes, base.ggml_backend_reg_name.restype = (
        [ctypes.c_void_p],
        ctypes.c_char_p,
    )
    return ggml, base


def ggml_devices() -> list[Device]:
    """Every device in ggml's registry, in its order (GPUs first, the CPU last)."""
    ggml, base = device_api()
    devices = []
    for index in range(ggml.ggml_backend_dev_count()):
        handle = ggml.ggml_backend_dev_get(index)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        base.ggml_backend_dev_memory(handle, ctypes.byref(free), ctypes.byref(total))
        devices.append(
            Device(
                backend=_text(
                    base.ggml_backend_reg_name(base.ggml_backend_dev_backend_reg(handle))
                ),
                name=_text(base.ggml_backend_dev_name(handle)),
                description=_text(base.ggml_backend_dev_description(handle)),
                kind=_DEVICE_KINDS.get(base.ggml_backend_dev_type(handle), "other"),
                free_bytes=free.value,
                total_bytes=total.value,
            )
        )
    return devices


def _text(value: bytes | None) -> str:
    return (value or b"").decode("utf-8", errors="replace")
