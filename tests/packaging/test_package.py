"""The packaged binary (dist/hearth/hearth from `make package`): serves headless and opens its
launcher. Run by `make test-package`, which sets HEARTH_PACKAGE; skipped otherwise."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from server.devices.backends import gpu_backends
from server.devices.vulkan import vulkan_devices
from server.models.files import resolve_model_path
from tests.support.hub_server import MODEL_FILE, REPO, HubRepo, LocalHub
from tests.support.servers import free_port, wait_until_ready

PACKAGE = os.environ.get("HEARTH_PACKAGE")
pytestmark = [
    pytest.mark.skipif(not PACKAGE, reason="set HEARTH_PACKAGE (make test-package)"),
    pytest.mark.model,  # the packaged server runs its bundled model
]


@dataclass
class Stopped:
    """How a packaged server ended (filled in when its `packaged_server` block is left)."""

    returncode: int | None = None
    output: str = ""


@contextlib.contextmanager
def packaged_server(arguments: list[str], env: dict[str, str]) -> Iterator[tuple[str, Stopped]]:
    """The packaged binary serving headless on a free port: yields its base URL once ready,
    and stops it with Ctrl-C on leaving the block."""
    assert PACKAGE is not None
    base = f"http://127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [PACKAGE, "--skiplauncher", "--port", base.rsplit(":", 1)[1], *arguments],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    stopped = Stopped()
    try:
        wait_until_ready(base, server)
        yield base, stopped
    finally:
        server.send_signal(signal.SIGINT)
        stopped.output, _ = server.communicate(timeout=30)
        stopped.returncode = server.returncode


def test_packaged_server_streams_a_completion(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}  # no model cache to lean on
    with packaged_server(["--contextsize", "2048"], env) as (base, stopped):
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x")
        chunks = list(
            client.completions.create(
                model="m", prompt="Once upon a time", max_tokens=12, stream=True
            )
        )
        assert "".join(c.choices[0].text for c in chunks if c.choices)
    assert stopped.returncode == 0, stopped.output
    assert "Traceback" not in stopped.output and "Hearth stopped." in stopped.output


def test_packaged_launcher_opens_offscreen(tmp_path: Path) -> None:
    assert PACKAGE is not None
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HEARTH_CONFIG_DIR": str(tmp_path)}
    launcher = subprocess.Popen(
        [PACKAGE], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        time.sleep(5)  # "open for a few seconds": it must still be running, window shown
        assert launcher.poll() is None, launcher.communicate()[0]
    finally:
        launcher.terminate()
        output, _ = launcher.communicate(timeout=30)
    assert "Traceback" not in output and "Error" not in output, output


@pytest.mark.skipif(
    "Vulkan" not in gpu_backends(), reason="this machine's llama.cpp build has no Vulkan backend"
)
def test_package_has_the_vulkan_backend_and_starts_without_a_driver(tmp_path: Path) -> None:
    assert PACKAGE is not None
    libraries = Path(PACKAGE).parent / "_internal" / "llama_cpp" / "lib"
    assert "Vulkan" in gpu_backends(libraries)
    listed = subprocess.run(
        [PACKAGE, "list-devices"], capture_output=True, text=True, timeout=120, check=True
    )
    for device in vulkan_devices():  # the launcher's device list works from the package
        assert f"Vulkan {device.index}: {device.name}" in listed.stdout
    no_driver = {**os.environ, "HOME": str(tmp_path), "VK_ICD_FILENAMES": "/nonexistent.json"}
    with packaged_server(["--usevulkan", "--contextsize", "1024"], no_driver) as (base, stopped):
        version = httpx.get(f"{base}/api/extra/version").json()
        assert (version["backend"], version["gpu_layers"]) == ("CPU", 0)
        answer = httpx.post(
            f"{base}/api/v1/generate", json={"prompt": "Hello", "max_length": 4}, timeout=120
        )
        assert answer.status_code == 200 and answer.json()["results"][0]["text"]
    assert stopped.returncode == 0, stopped.output
    assert "Backend: CPU (no GPU found)" in stopped.output


def test_packaged_server_downloads_a_model_named_by_hf(tmp_path: Path) -> None:
    """huggingface_hub is imported lazily (inside functions): the package must carry it."""
    hub = LocalHub()
    hub.add(HubRepo(REPO, {MODEL_FILE: resolve_model_path(None)}))
    hub.start()
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hub")}
    try:
        with packaged_server(["--hf", REPO, "--contextsize", "1024"], env) as (base, stopped):
            name = httpx.get(f"{base}/api/v1/model").json()["result"]
            assert name.endswith("gemma-3-270m-Q4_K_M")
    finally:
        hub.stop()
    assert stopped.returncode == 0, stopped.output
    assert "Downloading: 100%" in stopped.output and "Traceback" not in stopped.output
