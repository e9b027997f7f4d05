"""The packaged binary (dist/hearth/hearth from `make package`): serves headless and opens its
launcher. Run by `make test-package`, which sets HEARTH_PACKAGE; skipped otherwise."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import openai
import pytest

from tests.conftest import free_port, wait_until_ready

PACKAGE = os.environ.get("HEARTH_PACKAGE")
pytestmark = pytest.mark.skipif(not PACKAGE, reason="set HEARTH_PACKAGE (make test-package)")


def test_packaged_server_streams_a_completion(tmp_path: Path) -> None:
    assert PACKAGE is not None
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path)}  # no model cache to lean on
    server = subprocess.Popen(
        [PACKAGE, "--skiplauncher", "--port", str(port), "--contextsize", "2048"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until_ready(f"http://127.0.0.1:{port}", server)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        chunks = list(
            client.completions.create(
                model="m", prompt="Once upon a time", max_tokens=12, stream=True
            )
        )
        assert "".join(c.choices[0].text for c in chunks if c.choices)
    finally:
        server.send_signal(signal.SIGINT)
        output, _ = server.communicate(timeout=30)
    assert server.returncode == 0, output
    assert "Traceback" not in output and "Hearth stopped." in output


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
