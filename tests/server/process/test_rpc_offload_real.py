"""`hearth --rpc`: every layer of the bundled model on two `hearth rpc-worker`s, on loopback.

Weights on a remote device skip the CPU's repacking, so the local run it is compared with has
repacking off (`--parallelrequests 2` turns it off) and only the first decode's top logits are
compared, not texts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence

import httpx
import pytest

from tests.gpu.test_vulkan import first_logits
from tests.support.rpc_worker import cpu_worker, stop
from tests.support.servers import ROOT, RunningServer, free_port, stop_process

StartHearth = Callable[[Sequence[str]], RunningServer]


@pytest.fixture(scope="module")
def workers() -> Iterator[str]:
    """Two workers serving their CPU, one thread each; `--rpc`'s value for them."""
    started = []
    try:
        for _ in range(2):
            port = free_port()
            started.append((cpu_worker(port), f"127.0.0.1:{port}"))
        yield ",".join(endpoint for _, endpoint in started)
    finally:
        for worker, _ in started:
            stop(worker)


@pytest.mark.model  # loads the real model (tests/gpu/first_logits.py)
def test_every_layer_on_two_workers_gives_the_local_logits(workers: str) -> None:
    remote = first_logits(["--rpc", workers, "--gpulayers", "99", "--threads", "1"])
    local = first_logits(["--usecpu", "--parallelrequests", "2", "--threads", "1"])
    first, second = workers.split(",")
    placement = str(remote["placement"])  # what the console and the running view say
    assert f"RPC0 ({first}, " in placement and f"RPC1 ({second}, " in placement, placement
    assert "): 10 layers, " in placement and "): 8 layers and the output layer" in placement
    assert remote["gpu_layers"] == 19  # all of Gemma 3 270M's 18 blocks and its output layer
    remote_top = [(int(token), float(logit)) for token, logit in remote["top"]]  # type: ignore[attr-defined]
    local_top = [(int(token), float(logit)) for token, logit in local["top"]]  # type: ignore[attr-defined]
    # The logits agree within 0.05, and so does what follows from that on any CPU: the first
    # choice (ahead by ~5.5), and each side's top five among the other's ten (the fifth and
    # the eleventh lie ~0.9 apart). Not the same top five: the fifth and sixth are ~0.4 apart
    # here, and another CPU's numerics move them.
    remote_logits, local_logits = dict(remote_top), dict(local_top)
    assert remote_top[0][0] == local_top[0][0]
    for token in remote_logits.keys() & local_logits.keys():
        assert abs(remote_logits[token] - local_logits[token]) < 0.05, token
    assert {t for t, _ in local_top[:5]} <= remote_logits.keys()
    assert {t for t, _ in remote_top[:5]} <= local_logits.keys()


def test_the_server_generates_on_its_workers(start_hearth: StartHearth, workers: str) -> None:
    server = start_hearth(["--rpc", workers, "--gpulayers", "99", "--threads", "1"])
    version = httpx.get(f"{server.base_url}/api/extra/version", timeout=30).json()
    assert version["backend"] == "RPC" and version["gpu_layers"] == 19
    answer = httpx.post(
        f"{server.base_url}/completion",
        json={"prompt": "1, 2, 3, 4, 5, 6, 7,", "n_predict": 8, "ignore_eos": True},
        timeout=300,
    ).json()
    assert answer["tokens_predicted"] == 8 and answer["content"]


def test_an_unreachable_worker_is_named_before_anything_loads() -> None:
    nobody = f"127.0.0.1:{free_port()}"
    result = subprocess.run(
        [sys.executable, "-m", "server", "--skiplauncher", "--rpc", nobody],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert f"RPC worker {nobody} is unreachable" in result.stdout + result.stderr
    assert "hearth rpc-worker" in result.stdout + result.stderr


def test_a_lost_worker_ends_the_server_naming_it(start_hearth: StartHearth) -> None:
    """llama.cpp aborts the process that loses a worker mid-run; the `hearth` the user
    started outlives it, names the worker in its last line and exits 1."""
    port = free_port()
    worker = cpu_worker(port)
    endpoint = f"127.0.0.1:{port}"
    server = start_hearth(["--rpc", endpoint, "--gpulayers", "99", "--threads", "1"])
    assert server.process is not None
    body = {"prompt": "x", "max_tokens": 4000, "stream": True}
    with httpx.stream("POST", f"{server.base_url}/v1/completions", json=body, timeout=120) as r:
        lines = r.iter_lines()
        next(line for line in lines if line.startswith("data: "))  # generating on the worker
        worker.kill()
        worker.wait()
        with pytest.raises(httpx.RemoteProtocolError):  # its process is gone
            for _ in lines:
                pass
    assert server.process.wait(timeout=60) == 1
    last = server.wait_for_output(f"lost RPC worker {endpoint}", timeout=10)
    assert "Restart the worker, then Hearth." in last


def resident_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("holder", [0, 1])
def test_tensorsplit_puts_the_weights_where_it_says(start_hearth: StartHearth, holder: int) -> None:
    """`--tensorsplit 1,0` puts every offloaded layer (and so the output layer) on the first
    worker, `0,1` on the second: the worker that holds them grows by the weights, the other
    by next to nothing."""
    workers = []
    try:
        for _ in range(2):
            port = free_port()
            workers.append((cpu_worker(port), f"127.0.0.1:{port}"))
        before = [resident_mib(worker.pid) for worker, _ in workers]
        split = ",".join("1" if index == holder else "0" for index in range(2))
        endpoints = ",".join(endpoint for _, endpoint in workers)
        server = start_hearth(
            ["--rpc", endpoints, "--gpulayers", "99", "--threads", "1", "--tensorsplit", split]
        )
        now = [resident_mib(worker.pid) for worker, _ in workers]
        placement = httpx.get(f"{server.base_url}/api/extra/perf", timeout=30).json()["placement"]
        holder_endpoint = workers[holder][1]
        assert f"{holder_endpoint}, " in placement and "18 layers and the output layer" in placement
        grown = [after - was for after, was in zip(now, before, strict=True)]
        assert stop_process(server) == 0
    finally:
        for worker, _ in workers:
            stop(worker)
    assert grown[holder] > 150, grown  # the weights: most of the 253 MB file
    assert grown[1 - holder] < grown[holder] / 10, grown
