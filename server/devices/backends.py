"""Which GPU backends this build of llama.cpp has, found without loading llama.cpp.

llama-cpp-python ships one shared library per ggml backend next to libllama
(`libggml-vulkan.so`, `libggml-cuda.so`, …), so the files say what the build can do. The
launcher asks this before any server runs, and must stay import-light: it never imports
llama_cpp (which loads every backend, and for a GPU backend probes the devices).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from server.base.bundle import packaged, root_dir

# What a user without a GPU backend can do about it (the launcher and the console say it).
GPU_BUILD_HINT = (
    "For Vulkan (any GPU vendor), install glslc, libvulkan-dev and spirv-headers, then run "
    "make install again."
)
# ggml's backend library stems and the names users know them by, in KoboldCpp's order.
GPU_BACKENDS = {"cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal", "hip": "ROCm"}


def llama_library_dir() -> Path | None:
    """The folder of llama_cpp's shared libraries (in a checkout's venv or a packaged build)."""
    if packaged():
        return root_dir() / "llama_cpp" / "lib"
    spec = importlib.util.find_spec("llama_cpp")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def gpu_backends(library_dir: Path | None = None) -> tuple[str, ...]:
    """The user-facing names of the GPU backends built in ("Vulkan", "CUDA", …); empty for a
    CPU-only build."""
    folder = library_dir if library_dir is not None else llama_library_dir()
    if folder is None or not folder.is_dir():
        return ()
    present = {path.name for path in folder.iterdir()}
    return tuple(
        name
        for stem, name in GPU_BACKENDS.items()
        if any(
            file.startswith(f"libggml-{stem}.") or file == f"ggml-{stem}.dll" for file in present
        )
    )
