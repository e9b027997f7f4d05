"""packaging/install_llama.py: the build that `make install` gets, its wheel cache keys, and
the Vulkan-header patch. The build itself runs in `make install`; these check its rules and
that the installed build is the one this machine should have."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from server.devices.backends import gpu_backends

ROOT = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "install_llama", ROOT / "packaging/install_llama.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["install_llama"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


install_llama = load_script()
Build = install_llama.Build

# The lines of ggml-vulkan.cpp (llama-cpp-python 0.3.36) the patch works on.
VULKAN_SOURCE = """\
    if (debug_utils_ext) {
        extensions.push_back("VK_EXT_debug_utils");
    }
    VkBool32 enable_best_practice = layer_settings;
    std::vector<vk::LayerSettingEXT> settings = {
        {
            "VK_LAYER_KHRONOS_validation",
            "validate_best_practices",
            vk::LayerSettingTypeEXT::eBool32,
            1,
            &enable_best_practice
        },
    };
    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);
    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, \
layers, extensions, &layer_setting_info);
#ifdef __APPLE__
"""


def test_each_backend_and_cpu_target_has_its_own_wheel_folder() -> None:
    builds = [
        Build(backend, portable)
        for backend in ("cpu", "vulkan", "cuda")
        for portable in (False, True)
    ]
    assert len({build.key for build in builds}) == len(builds)
    assert Build("vulkan", False).cmake_args == "-DGGML_RPC=on -DGGML_VULKAN=on"
    assert Build("cpu", True).cmake_args == "-DGGML_RPC=on -DGGML_NATIVE=OFF"
    assert Build("cuda", False).cmake_args == "-DGGML_RPC=on -DGGML_CUDA=on"
    assert "libggml-vulkan" in Build("vulkan", False).libraries
    assert "libggml-rpc" in Build("cpu", False).libraries


def source_tree(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    path = source / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    path.parent.mkdir(parents=True)
    path.write_text(VULKAN_SOURCE)
    return source


def headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_layer_settings: bool) -> None:
    include = tmp_path / "include"
    (include / "vulkan").mkdir(parents=True)
    (include / "vulkan/vulkan_core.h").write_text(
        "#define VK_EXT_layer_settings 1\n" if with_layer_settings else "// 1.3.239\n"
    )
    monkeypatch.setattr(install_llama, "INCLUDE_DIRS", [include])
    monkeypatch.delenv("VULKAN_SDK", raising=False)


def test_the_patch_guards_layer_settings_on_old_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers(tmp_path, monkeypatch, with_layer_settings=False)
    source = source_tree(tmp_path)
    assert install_llama.patch_layer_settings(source)
    patched = (source / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp").read_text()
    lines = patched.splitlines()
    guard = lines.index("#if defined(VK_EXT_layer_settings)")
    assert lines[guard + 1] == "    VkBool32 enable_best_practice = layer_settings;"
    fallback = lines.index("#else")
    assert "&layer_setting_info" in lines[fallback - 1]
    assert lines[fallback + 2].endswith("&app_info, layers, extensions);")
    assert lines[fallback + 3] == "#endif"
    # nothing else changed
    removed = [line for line in lines if line not in VULKAN_SOURCE.splitlines()]
    assert len(removed) == 5


def test_no_patch_on_headers_that_have_layer_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers(tmp_path, monkeypatch, with_layer_settings=True)
    source = source_tree(tmp_path)
    assert not install_llama.patch_layer_settings(source)
    path = source / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    assert path.read_text() == VULKAN_SOURCE


def test_a_changed_source_stops_the_build_with_a_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers(tmp_path, monkeypatch, with_layer_settings=False)
    source = source_tree(tmp_path)
    path = source / "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    path.write_text(VULKAN_SOURCE.replace("enable_best_practice", "best_practice"))
    with pytest.raises(SystemExit, match="patch does not apply"):
        install_llama.patch_layer_settings(source)


def test_without_the_vulkan_tools_auto_builds_for_the_cpu_and_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(install_llama, "INCLUDE_DIRS", [tmp_path])
    monkeypatch.setattr(install_llama.shutil, "which", lambda _name: None)
    monkeypatch.delenv("VULKAN_SDK", raising=False)
    assert install_llama.choose_backend("auto") == "cpu"
    notice = capsys.readouterr().out.strip()
    assert notice.count("\n") == 0  # one line
    assert "apt install glslc libvulkan-dev spirv-headers" in notice
    with pytest.raises(SystemExit, match="apt install glslc libvulkan-dev spirv-headers"):
        install_llama.choose_backend("vulkan")
    with pytest.raises(SystemExit, match="nvcc"):
        install_llama.choose_backend("cuda")


def test_the_installed_build_is_the_one_this_machine_should_have() -> None:
    """A machine with the Vulkan tools gets the Vulkan build: a reused CPU-only wheel (pip's
    cache ignores CMAKE_ARGS) would fail here."""
    installed = install_llama.installed_build()
    assert installed is not None, "llama-cpp-python was not installed by install_llama.py"
    assert "libggml-rpc" in installed.libraries
    if not install_llama.missing_vulkan_tools():
        assert installed.backend in ("vulkan", "cuda")
        assert "Vulkan" in gpu_backends() or "CUDA" in gpu_backends()
