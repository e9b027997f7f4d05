"""Builds and installs llama-cpp-python with the backends this machine can build.

`make install` runs it with the virtualenv's Python before anything else is installed:

    python packaging/install_llama.py [--backend auto|cpu|vulkan|cuda] [--portable]

`auto` (the default) builds the CPU and Vulkan backends when the Vulkan build tools are
present (one build that still runs on machines without a GPU), otherwise the CPU backend alone
with a one-line notice naming the packages that bring GPU support. Every build includes
ggml's RPC backend (for `hearth rpc-worker` and `--rpc`).

Why not a plain `pip install`: pip's wheel cache is keyed by the package version only and
ignores CMAKE_ARGS, so a CPU-only wheel cached earlier would silently be reused for a Vulkan
build (and the other way round). This script builds with `pip wheel --no-cache-dir` into a
folder of its own per version, backend and CPU target, installs from there, and then checks
that the backend libraries really are in the installed package.

Debian 12's Vulkan headers (1.3.239) predate VK_EXT_layer_settings, which the vendored
ggml-vulkan.cpp uses only to turn on the validation layer's best-practice checks
(GGML_VULKAN_VALIDATE, a debugging build). When the headers lack it, the unpacked source is
patched to create the Vulkan instance without those settings (see `patch_layer_settings`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON = "llama-cpp-python"
VERSION = "0.3.36"
# Written into the installed package: which build this is, so a later run knows whether the
# installed one already matches what was asked for.
BUILD_MARKER = ".hearth-build"
VULKAN_PACKAGES = "glslc libvulkan-dev spirv-headers"
INCLUDE_DIRS = [Path("/usr/include"), Path("/usr/local/include")]


@dataclass(frozen=True)
class Build:
    backend: str  # "cpu", "vulkan" or "cuda"
    portable: bool  # GGML_NATIVE=OFF: runs on any x86-64 with AVX2, not only this CPU

    @property
    def key(self) -> str:
        return f"{VERSION}-{self.backend}-rpc-{'portable' if self.portable else 'native'}"

    @property
    def cmake_args(self) -> str:
        args = ["-DGGML_RPC=on"]
        if self.backend == "vulkan":
            args.append("-DGGML_VULKAN=on")
        if self.backend == "cuda":
            args.append("-DGGML_CUDA=on")
        if self.portable:
            args.append("-DGGML_NATIVE=OFF")
        return " ".join(args)

    @property
    def libraries(self) -> list[str]:
        """Library stems that must be in llama_cpp/lib for this build to count as installed."""
        stems = ["libllama", "libggml-cpu", "libggml-rpc"]
        if self.backend != "cpu":
            stems.append(f"libggml-{self.backend}")
        return stems


def say(message: str) -> None:
    print(f"[install-llama] {message}", flush=True)


def include_dirs() -> list[Path]:
    dirs = list(INCLUDE_DIRS)
    if os.environ.get("VULKAN_SDK"):
        dirs.insert(0, Path(os.environ["VULKAN_SDK"]) / "include")
    return dirs


def find_header(relative: str) -> Path | None:
    return next((d / relative for d in include_dirs() if (d / relative).is_file()), None)


def missing_vulkan_tools() -> list[str]:
    """Debian package names of the Vulkan build dependencies this machine lacks."""
    missing = []
    if shutil.which("glslc") is None:
        missing.append("glslc")
    if find_header("vulkan/vulkan.hpp") is None:
        missing.append("libvulkan-dev")
    # ggml-vulkan's CMakeLists needs SPIRV-Headers' spirv.hpp to compile its shaders' helper
    if find_header("spirv/unified1/spirv.hpp") is None:
        missing.append("spirv-headers")
    return missing


def choose_backend(requested: str) -> str:
    if requested == "cuda":
        if shutil.which("nvcc") is None:
            sys.exit("[install-llama] GPU=cuda needs the CUDA toolkit (nvcc on PATH).")
        return "cuda"
    if requested == "cpu":
        return "cpu"
    missing = missing_vulkan_tools()
    if not missing:
        return "vulkan"
    if requested == "vulkan":
        sys.exit(f"[install-llama] A Vulkan build needs: apt install {' '.join(missing)}")
    say(
        f"building for the CPU only: for GPU support (Vulkan, any vendor) install "
        f"{' '.join(missing)} (Debian/Ubuntu: apt install {VULKAN_PACKAGES}), then make install"
    )
    return "cpu"


def installed_library_dir() -> Path | None:
    spec = importlib.util.find_spec("llama_cpp")  # no import: it would load the libraries
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def has_libraries(folder: Path, build: Build) -> list[str]:
    """The library stems of `build` missing from `folder`."""
    names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    return [stem for stem in build.libraries if not any(n.startswith(f"{stem}.") for n in names)]


def installed_build() -> Build | None:
    """The build this script installed before (its marker), if its libraries are all there."""
    folder = installed_library_dir()
    marker = folder.parent / BUILD_MARKER if folder else None
    if folder is None or marker is None or not marker.is_file():
        return None
    version, backend, _rpc, target = [*marker.read_text().strip().split("-"), "", "", ""][:4]
    if version != VERSION or backend not in ("cpu", "vulkan", "cuda"):
        return None
    build = Build(backend, target == "portable")
    return None if has_libraries(folder, build) else build


def pip(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def patch_layer_settings(source: Path) -> bool:
    """Lets ggml-vulkan.cpp build against Vulkan headers without VK_EXT_layer_settings.

    The layer settings only switch on the validation layer's best-practice checks; without
    them the instance is created exactly as before, minus that chain entry. Returns whether
    the file was changed."""
    header = find_header("vulkan/vulkan_core.h")
    if header is None or "VK_EXT_layer_settings" in header.read_text(errors="replace"):
        return False
    path = source / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    text = path.read_text()
    start = "    VkBool32 enable_best_practice = layer_settings;\n"
    end = (
        "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, "
        "layers, extensions, &layer_setting_info);\n"
    )
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        sys.exit(
            f"[install-llama] {path.name} changed: the VK_EXT_layer_settings patch does not apply"
        )
    fallback = (
        "#else\n"
        "    (void) layer_settings;\n"
        "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, "
        "layers, extensions);\n"
        "#endif\n"
    )
    text = text.replace(start, "#if defined(VK_EXT_layer_settings)\n" + start)
    text = text.replace(end, end + fallback)
    path.write_text(text)
    return True


def show_progress(log: Path, done: threading.Event, started: float) -> None:
    """Prints the build's step count ("[212/521]", from ninja or make) every 30 s."""
    while not done.wait(30):
        step = ""
        try:
            for line in reversed(log.read_text(errors="replace").splitlines()[-200:]):
                match = re.match(r"\s*(\[\s*\d+(?:/\d+|%)\])", line)
                if match:
                    step = match.group(1) + " "
                    break
        except OSError:
            pass
        minutes, seconds = divmod(int(time.monotonic() - started), 60)
        say(f"still building: {step}{minutes}m{seconds:02d}s (log: {log})")


def build_wheel(build: Build, wheel_dir: Path) -> Path:
    minutes = {"cpu": "6", "vulkan": "15", "cuda": "20+"}[build.backend]
    target = "portable" if build.portable else "native"
    say(
        f"building {LLAMA_CPP_PYTHON} {VERSION} ({build.backend} + rpc, {target} CPU code): "
        f"about {minutes} minutes on 2 cores"
    )
    with tempfile.TemporaryDirectory(prefix="hearth-llama-") as tmp:
        work = Path(tmp)
        pip(
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(work),
            f"{LLAMA_CPP_PYTHON}=={VERSION}",
        )
        sdist = next(work.glob("*.tar.gz"))
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
        source = next(p for p in work.iterdir() if p.is_dir())
        if build.backend == "vulkan" and patch_layer_settings(source):
            say("patched ggml-vulkan.cpp for Vulkan headers without VK_EXT_layer_settings")
        wheel_dir.parent.mkdir(parents=True, exist_ok=True)
        log = wheel_dir.parent / f"build-{build.key}.log"
        env = dict(os.environ, CMAKE_ARGS=build.cmake_args)
        # CMAKE_BUILD_PARALLEL_LEVEL: scikit-build-core would otherwise build with one job
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        staging = work / "wheel"
        done = threading.Event()
        started = time.monotonic()
        watcher = threading.Thread(target=show_progress, args=(log, done, started), daemon=True)
        watcher.start()
        with log.open("w") as output:
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "wheel",
                    "--no-cache-dir",
                    "--no-deps",
                    "-v",
                    "-w",
                    str(staging),
                    str(source),
                ],
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                check=False,
            )
        done.set()
        if result.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            sys.exit(f"{tail}\n[install-llama] the build failed; the whole log is {log}")
        wheel_dir.mkdir(exist_ok=True)
        wheel = next(staging.glob("*.whl"))
        # moved in last, whole: an interrupted build never leaves a half wheel in the cache
        shutil.move(str(wheel), wheel_dir / wheel.name)
    minutes_taken, seconds = divmod(int(time.monotonic() - started), 60)
    say(f"built in {minutes_taken}m{seconds:02d}s")
    return wheel_dir / wheel.name


def wheel_cache() -> Path:
    if os.environ.get("HEARTH_WHEEL_CACHE"):
        return Path(os.environ["HEARTH_WHEEL_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "hearth" / "wheels"


def install(build: Build) -> None:
    if installed_build() == build:
        say(f"{LLAMA_CPP_PYTHON} {build.key} is installed")
        return
    wheel_dir = wheel_cache() / f"{LLAMA_CPP_PYTHON}-{build.key}"
    wheels = sorted(wheel_dir.glob("*.whl")) if wheel_dir.is_dir() else []
    wheel = wheels[0] if wheels else build_wheel(build, wheel_dir)
    say(f"installing {wheel}")
    pip("install", "--quiet", "--no-deps", "--force-reinstall", str(wheel))
    folder = installed_library_dir()
    missing = has_libraries(folder, build) if folder else build.libraries
    if missing:
        sys.exit(f"[install-llama] the installed build lacks {', '.join(missing)} (from {wheel})")
    assert folder is not None
    (folder.parent / BUILD_MARKER).write_text(build.key + "\n")
    say(f"installed {build.key}: {', '.join(build.libraries)} present in {folder}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["auto", "cpu", "vulkan", "cuda"], default="auto")
    parser.add_argument("--portable", action="store_true", help="GGML_NATIVE=OFF (for packages)")
    options = parser.parse_args()
    installed = installed_build()
    if (
        options.backend == "auto"
        and installed is not None
        and installed.backend != "cpu"
        and installed.portable == options.portable
    ):
        # a GPU build chosen earlier (GPU=cuda, say) is not replaced by `auto`
        say(f"{LLAMA_CPP_PYTHON} {installed.key} is installed")
        return
    install(Build(choose_backend(options.backend), options.portable))


if __name__ == "__main__":
    main()
