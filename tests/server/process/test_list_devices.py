"""`hearth list-devices`: its own --help and option errors (before llama.cpp loads), and the
JSON list the launcher reads, which always has the CPU."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.servers import ROOT


def list_devices(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server", "list-devices", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_help_describes_the_subcommand_and_lists_nothing() -> None:
    result = list_devices("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: hearth list-devices") and "--json" in result.stdout
    assert "ggml" not in result.stdout + result.stderr  # llama.cpp was never loaded


def test_a_mistyped_option_is_a_usage_error() -> None:
    result = list_devices("--jsn")
    assert result.returncode == 2
    assert "unrecognized arguments: --jsn" in result.stderr and not result.stdout


def test_json_lists_the_cpu_with_its_memory() -> None:
    result = list_devices("--json")
    assert result.returncode == 0, result.stderr
    devices = json.loads(result.stdout)
    (cpu,) = [device for device in devices if device["backend"] == "CPU"]
    assert cpu["total_bytes"] >= cpu["free_bytes"] > 0
