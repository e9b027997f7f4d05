"""Starting and stopping the servers the benchmarks measure (shared by every bench script)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parent.parent
THREADS = 2
CONTEXT = 4096


def hearth_command(port: int, *extra: str, context: int = CONTEXT) -> list[str]:
    """`python -m server` headless and quiet, with the bench's threads and context."""
    return [
        sys.executable,
        "-m",
        "server",
        "--skiplauncher",
        "--quiet",
        "--port",
        str(port),
        "--threads",
        str(THREADS),
        "--contextsize",
        str(context),
        *extra,
    ]


def llama_server_binary() -> str:
    """llama.cpp's llama-server, built from the llama.cpp Hearth runs (once; then cached)."""
    return subprocess.run(
        ["bash", str(ROOT / "bench" / "build_llama_server.sh")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def start_server(
    command: Sequence[str],
    base_url: str,
    probe: str,
    timeout: float = 300,
    cwd: Path = ROOT,
    log: IO[bytes] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server (from checkout `cwd`) and return once `probe` answers 200; its output
    goes to `log` when given (to read what it says of itself), else nowhere."""
    output = log if log is not None else subprocess.DEVNULL
    process = subprocess.Popen(list(command), cwd=cwd, stdout=output, stderr=output)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{command[0]} exited with {process.returncode}")
        try:
            if httpx.get(base_url + probe, timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    stop_server(process)
    raise RuntimeError(f"{command[0]} did not become ready")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait()
