"""`hearth rpc-worker`: ggml's RPC server from llama-cpp-python's own libraries, on loopback.

A client here is llama.cpp's RPC client asking the worker for its device's memory, run in a
child process: llama.cpp's RPC client aborts its whole process when a worker misbehaves."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Sequence

import pytest

from tests.support.rpc_worker import lines_until_ready, start_worker, stop
from tests.support.servers import ROOT, free_port

PROBE = """
import ctypes, sys
import llama_cpp
from server.core.llama.loading.native import shared_library
rpc = ctypes.CDLL(str(shared_library("ggml-rpc")))
memory = rpc.ggml_backend_rpc_get_device_memory
memory.argtypes = [ctypes.c_char_p, ctypes.c_uint32] + [ctypes.POINTER(ctypes.c_size_t)] * 2
free, total = ctypes.c_size_t(), ctypes.c_size_t()
memory(sys.argv[1].encode(), 0, ctypes.byref(free), ctypes.byref(total))
print(total.value)
"""


def device_memory(endpoint: str) -> int:
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, endpoint],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(probe.stdout.split()[-1])


def test_the_worker_serves_its_cpu_over_rpc_and_stops_on_ctrl_c() -> None:
    port = free_port()
    worker = start_worker("--port", str(port), "--threads", "1", "--device", "CPU")
    try:
        started = "".join(lines_until_ready(worker))
        assert f"RPC worker on 127.0.0.1:{port}, serving CPU" in started
        assert "no authentication" in started and "WARNING" not in started
        assert device_memory(f"127.0.0.1:{port}") > 0  # llama.cpp's client got an answer
    finally:
        code, rest = stop(worker)
    assert code == 0
    assert "Accepted client connection" in rest and rest.rstrip().endswith("RPC worker stopped.")


def test_listening_beyond_loopback_warns() -> None:
    worker = start_worker("--host", "0.0.0.0", "--port", str(free_port()), "--device", "CPU")
    try:
        started = "".join(lines_until_ready(worker))
    finally:
        code, _ = stop(worker)
    assert "WARNING: listening on 0.0.0.0, not loopback" in started
    assert code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "Nope0"], "no device Nope0 here (there are: "),
        (["--threads", "0"], "--threads at least 1"),
    ],
)
def test_bad_options_are_one_clear_line(args: Sequence[str], message: str) -> None:
    worker = start_worker("--port", str(free_port()), *args)
    output, _ = worker.communicate(timeout=60)
    assert worker.returncode == 2
    assert message in output


def test_a_port_in_use_is_named() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        worker = start_worker("--port", str(port), "--device", "CPU")
        output, _ = worker.communicate(timeout=60)
    assert worker.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in output
