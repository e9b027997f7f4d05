"""Where the model runs: the memory estimate, auto GPU layers, device choice and its errors.

These run on any build; the Vulkan device itself is exercised in tests/gpu/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.core.llama.loading.devices import choose_devices, layers_per_device, plan_placement
from server.core.llama.loading.ggml_devices import ggml_devices
from server.core.scheduling.engine import EngineError
from server.devices.vulkan import vulkan_devices
from server.models.gguf import gguf_summary
from server.models.memory import HEADROOM_BYTES, MIB, auto_gpu_layers, estimate_memory
from server.process.load_settings import load_settings
from server.settings.config import HearthSettings


def test_the_estimate_adds_up_to_the_weights_in_the_file(bundled: Path) -> None:
    summary = gguf_summary(bundled)
    estimate = estimate_memory(summary, context=4096, batch=512)
    assert estimate.layers == 18 and estimate.all_layers == 19
    layer_tensors = sum(t.n_bytes or 0 for t in summary.tensors if t.name.startswith("blk."))
    assert abs(estimate.layer_bytes * estimate.layers - layer_tensors) < estimate.layers
    # Gemma 3 ties its output to the token embedding: the output layer is that tensor again.
    assert estimate.output_bytes >= next(
        t.n_bytes for t in summary.tensors if t.name == "token_embd.weight"
    )
    # f16 K and V for 4096 positions of one 256-wide KV head
    assert estimate.kv_layer_bytes == 4096 * 1 * (256 + 256) * 2
    # A longer context needs more: the KV cache grows with it.
    longer = estimate_memory(summary, context=16384, batch=512)
    assert longer.device_bytes(19) > estimate.device_bytes(19)


def test_auto_layers_fit_the_free_memory(bundled: Path) -> None:
    estimate = estimate_memory(gguf_summary(bundled), context=4096, batch=512)
    sizes = [estimate.device_bytes(n) for n in range(estimate.all_layers + 1)]
    assert sizes == sorted(sizes) and sizes[0] == 0
    plenty = estimate.device_bytes(estimate.all_layers) + HEADROOM_BYTES
    assert auto_gpu_layers(estimate, plenty) == estimate.all_layers
    assert auto_gpu_layers(estimate, HEADROOM_BYTES) == 0
    # Room for exactly ten repeating layers: ten, not eleven, and not the output layer.
    ten = estimate.device_bytes(10) + HEADROOM_BYTES
    assert auto_gpu_layers(estimate, ten) == 10
    assert auto_gpu_layers(estimate, ten - 1) == 9


def test_usecpu_hides_every_gpu_and_usevulkan_picks_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    choose_devices(load_settings(HearthSettings()))
    assert "GGML_VK_VISIBLE_DEVICES" not in os.environ  # ggml's default: every GPU
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    choose_devices(load_settings(HearthSettings(usevulkan=[])))
    assert "GGML_VK_VISIBLE_DEVICES" not in os.environ  # --usevulkan alone: every Vulkan GPU
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""  # and no CUDA one
    choose_devices(load_settings(HearthSettings(usevulkan=[1, 0])))
    assert os.environ["GGML_VK_VISIBLE_DEVICES"] == "1,0"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    choose_devices(
        load_settings(HearthSettings(usecuda=["normal", "1", "mmq"]))
    )  # KoboldCpp's words
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert os.environ["GGML_VK_VISIBLE_DEVICES"] == ""
    choose_devices(load_settings(HearthSettings(usecpu=True)))
    assert os.environ["GGML_VK_VISIBLE_DEVICES"] == ""
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""


def test_placement_on_the_cpu_says_why(bundled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "")  # restored after the test
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    placement = plan_placement(
        load_settings(HearthSettings(usecpu=True, gpulayers=30)), bundled, ("Vulkan",)
    )
    assert (placement.backend, placement.gpu_layers, placement.reason) == ("CPU", 0, "--usecpu")
    assert placement.total_layers == 19
    placement = plan_placement(load_settings(HearthSettings()), bundled, ())
    assert placement.gpu_layers == 0
    assert placement.reason == "this build of llama.cpp has no GPU backend"
    assert placement.describe() == "CPU (this build of llama.cpp has no GPU backend)"


def test_a_vulkan_id_the_machine_lacks_is_refused_by_name(
    bundled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "")
    missing = len(vulkan_devices()) + 3
    with pytest.raises(EngineError, match=rf"--usevulkan {missing}: no such Vulkan device"):
        plan_placement(load_settings(HearthSettings(usevulkan=[missing])), bundled, ("Vulkan",))


def test_ggml_lists_the_cpu_with_its_memory() -> None:
    cpu = [device for device in ggml_devices() if device.backend == "CPU"]
    assert len(cpu) == 1 and cpu[0].kind == "CPU" and not cpu[0].takes_layers
    assert cpu[0].total_bytes > 256 * MIB and 0 < cpu[0].free_bytes <= cpu[0].total_bytes


@pytest.mark.parametrize(
    ("shares", "gpu_layers", "held"),
    [
        ([1, 1], 99, ["10 layers", "8 layers and the output layer"]),
        ([1, 0], 99, ["18 layers and the output layer", "0 layers"]),
        ([3, 1], 99, ["15 layers", "3 layers and the output layer"]),
        ([1, 1], 10, ["5 layers", "5 layers"]),  # the output layer stays on the CPU
        ([0, 0], 99, ["10 layers", "8 layers and the output layer"]),  # no shares: even
        ([2], 99, ["18 layers and the output layer", "0 layers"]),  # missing shares are 0
    ],
)
def test_layers_per_device_follow_llama_cpps_split_rule(
    shares: list[float], gpu_layers: int, held: list[str]
) -> None:
    """Gemma 3 270M: 18 repeating layers and the output layer over two devices."""
    assert layers_per_device(shares, 2, gpu_layers, 18) == held


def test_auto_leaves_room_for_the_projector_and_the_draft_model(
    bundled: Path, tmp_path: Path
) -> None:
    from server.core.llama.loading.devices import room_beside
    from server.models.memory import KvCacheLayout
    from tests.support.projector_gguf import write_projector

    projector = write_projector(tmp_path / "mmproj.gguf", bundled)
    kv = KvCacheLayout()

    def room(**values: object) -> int:
        settings = load_settings(HearthSettings(contextsize=4096, **values), bundled)
        return room_beside(settings, bundled, kv)

    assert room() == 0
    assert room(mmproj=str(projector)) == projector.stat().st_size
    assert room(mmproj=str(projector), mmprojcpu=True) == 0  # kept off the GPU
    # (a projector made for another model of the folder takes no room beside this one)
    other = load_settings(HearthSettings(mmproj=str(projector)), tmp_path / "other.gguf")
    assert room_beside(other, bundled, kv) == 0
    estimate = estimate_memory(gguf_summary(bundled), context=4096, batch=512)
    assert room(draftmodel=str(bundled)) == estimate.device_bytes(estimate.all_layers)
    assert room(draftmodel=str(bundled), draftgpulayers=5) == estimate.device_bytes(5)
    assert room(draftmodel=str(bundled), draftgpulayers=0) == 0
