"""The Vulkan backend on a real Vulkan device: Mesa's lavapipe (llvmpipe) in CI.

ggml passes over CPU-type Vulkan devices unless chosen by index, so these tests choose device
0: the server through GGML_VK_VISIBLE_DEVICES=0 with a bare `--usevulkan`, the logits check
with `--usevulkan 0` (from which Hearth sets that variable itself). lavapipe is slow (about
a token per second), so the tests are few and generate at most 6 tokens. They skip, saying
why, on a build without the Vulkan backend or a machine without a Vulkan driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence

import httpx
import openai
import pytest
from pytestqt.qtbot import QtBot

from server.devices.backends import gpu_backends
from server.devices.listing import ListedDevice
from server.devices.vulkan import vulkan_devices
from tests.support.servers import ROOT, RunningServer
from tests.support.sse import iter_sse

pytestmark = [
    pytest.mark.skipif(
        "Vulkan" not in gpu_backends(),
        reason="this llama.cpp build has no Vulkan backend (make install with glslc, "
        "libvulkan-dev and spirv-headers installed builds it)",
    ),
    pytest.mark.skipif(
        not vulkan_devices(),
        reason="no Vulkan driver on this machine (mesa-vulkan-drivers gives lavapipe)",
    ),
]

DEVICE = 0  # lavapipe, or the first GPU on a real machine
# Enough for the 8 characters the two dialects' texts are compared on (each token ~1 s here).
MAX_TOKENS = 6


def device_flags() -> list[str]:
    return ["--usevulkan", str(DEVICE), "--gpulayers", "99"]


@pytest.fixture(scope="module")
def vulkan_server(start_hearth: Callable[..., RunningServer]) -> RunningServer:
    # The other way to choose a device: ggml's own variable, which a bare --usevulkan keeps.
    return start_hearth(
        ["--usevulkan", "--gpulayers", "99", "--contextsize", "1024"],
        env={"GGML_VK_VISIBLE_DEVICES": str(DEVICE)},
    )


def test_the_server_runs_on_the_vulkan_device_and_says_so(vulkan_server: RunningServer) -> None:
    name = vulkan_devices()[DEVICE].name
    version = httpx.get(f"{vulkan_server.base_url}/api/extra/version").json()
    assert version["backend"] == "Vulkan"
    assert version["device"].startswith(f"Vulkan0 ({name}")
    assert version["gpu_layers"] == 19  # 99 asked, the model has 18 + the output layer
    line = vulkan_server.wait_for_output("Backend: ")
    assert f"Backend: Vulkan: every layer on Vulkan0 ({name}" in line
    perf = httpx.get(f"{vulkan_server.base_url}/api/extra/perf").json()
    assert perf["placement"].startswith("Vulkan: every layer on Vulkan0")


def test_streams_over_openai_and_koboldai(vulkan_server: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{vulkan_server.base_url}/v1", api_key="unused")
    # The prompt into the cache first: the two runs compared then both decode only its last
    # token (a first run decodes it whole, through other kernels, and a near-tie may flip).
    client.completions.create(model="hearth", prompt="Once upon a time", max_tokens=1)
    pieces = [
        chunk.choices[0].text
        for chunk in client.completions.create(
            model="hearth",
            prompt="Once upon a time",
            max_tokens=MAX_TOKENS,
            stream=True,
            temperature=0,
        )
        if chunk.choices
    ]
    assert len("".join(pieces)) >= 8 and len(pieces) <= MAX_TOKENS + 1
    with httpx.stream(
        "POST",
        f"{vulkan_server.base_url}/api/extra/generate/stream",
        json={"prompt": "Once upon a time", "max_length": MAX_TOKENS, "temperature": 0},
        timeout=300,
    ) as response:
        tokens = [event.json()["token"] for event in iter_sse(response) if event.data]
    assert "".join(tokens)
    # Greedy on the same device, in the same cache state: both dialects produced the same text.
    assert "".join(tokens).startswith("".join(pieces)[:8])


def first_logits(flags: Sequence[str]) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.gpu.first_logits", *flags],
        cwd=ROOT,
        env={**os.environ},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    answer: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.model  # loads the real model (tests/gpu/first_logits.py)
def test_first_decode_logits_agree_with_the_cpu() -> None:
    """Not texts: greedy text may differ between backends on near-tied logits (numerics)."""
    vulkan = first_logits(device_flags())
    cpu = first_logits(["--usecpu"])
    assert vulkan["gpu_layers"] == 19 and cpu["gpu_layers"] == 0
    assert str(vulkan["placement"]).startswith("Vulkan: every layer on Vulkan0")
    vulkan_top = [int(token) for token, _ in vulkan["top"]]  # type: ignore[attr-defined]
    cpu_top = [(int(token), float(logit)) for token, logit in cpu["top"]]  # type: ignore[attr-defined]
    # Logits within 0.5 of each other, and what follows from that: with a first choice ahead
    # by more than twice that, the same first choice; the CPU's top three among the device's
    # ten. Not the same top five: ranks two to seven lie within 1.1 of each other.
    assert cpu_top[0][1] - cpu_top[1][1] > 1.0, "the prompt must have a clear first choice"
    assert vulkan_top[0] == cpu_top[0][0]
    vulkan_logits = {int(token): float(logit) for token, logit in vulkan["top"]}  # type: ignore[attr-defined]
    assert {token for token, _ in cpu_top[:3]} <= vulkan_logits.keys()
    for token, logit in cpu_top:
        if token in vulkan_logits:
            assert abs(vulkan_logits[token] - logit) < 0.5, token


def test_the_launcher_lists_the_device_and_auto_fits_its_memory(qtbot: QtBot) -> None:
    from app.device_probe import DeviceProbe
    from app.tabs.settings_tabs import QuickLaunchTab
    from server.models.files import resolve_model_path
    from server.settings.config import HearthSettings

    probe = DeviceProbe()
    with qtbot.waitSignal(probe.found, timeout=120_000) as found:
        probe.start()
    devices: list[ListedDevice] = found.args[0]
    vulkan = [device for device in devices if device.backend == "Vulkan"]
    name = vulkan_devices()[DEVICE].name
    assert vulkan[DEVICE].name == name and vulkan[DEVICE].total_bytes > 0
    tab = QuickLaunchTab()
    qtbot.addWidget(tab)
    tab.load(HearthSettings(model_param=str(resolve_model_path(None)), usevulkan=[DEVICE]))
    tab.gpu.set_devices(devices)
    assert tab.gpu.backend.currentText().startswith(f"Use Vulkan: {DEVICE}: {name}")
    free_mib = f"{vulkan[DEVICE].free_bytes / 2**20:,.0f} MiB free"
    note = tab.gpu_note.text()
    assert note.startswith("Auto: ") and note.endswith(f"of {free_mib}")
    assert int(note.split()[1]) > 0


def test_without_a_vulkan_driver_the_vulkan_build_runs_on_the_cpu(
    start_hearth: Callable[..., RunningServer],
) -> None:
    server = start_hearth(["--usevulkan"], env={"VK_ICD_FILENAMES": "/nonexistent.json"})
    version = httpx.get(f"{server.base_url}/api/extra/version").json()
    assert (version["backend"], version["gpu_layers"]) == ("CPU", 0)
    answer = httpx.post(
        f"{server.base_url}/api/v1/generate",
        json={"prompt": "Hello", "max_length": 4},
        timeout=120,
    )
    assert answer.status_code == 200 and answer.json()["results"][0]["text"]
