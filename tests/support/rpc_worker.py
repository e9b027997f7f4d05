"""A real `hearth rpc-worker` in a subprocess: started, read until ready, stopped with Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

from tests.support.servers import ROOT

READY_LINE = "Use it from Hearth with: --rpc"


def start_worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "server", "rpc-worker", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def lines_until_ready(worker: subprocess.Popen[str]) -> Iterator[str]:
    assert worker.stdout is not None
    for line in worker.stdout:
        yield line
        if line.startswith(READY_LINE):
            return
    raise AssertionError(f"the worker ended before it was ready (exit {worker.wait()})")


def cpu_worker(port: int) -> subprocess.Popen[str]:
    """A worker serving its CPU with one thread, once it says it is ready."""
    worker = start_worker("--port", str(port), "--threads", "1", "--device", "CPU")
    for _ in lines_until_ready(worker):
        pass
    return worker


def stop(worker: subprocess.Popen[str]) -> tuple[int, str]:
    worker.send_signal(signal.SIGINT)
    rest, _ = worker.communicate(timeout=30)
    return worker.returncode, rest
