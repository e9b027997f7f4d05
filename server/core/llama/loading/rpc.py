"""llama.cpp's RPC backend (ggml-rpc): devices lent between machines.

Worker side: `serve_devices` runs ggml's own RPC server (`ggml_backend_rpc_start_server`,
what llama.cpp's `rpc-server` binary calls) from the libraries llama-cpp-python ships, so a
worker needs no separate binary. It never returns: it accepts one client at a time until the
process ends.

Client side (`--rpc`): `register_workers` adds each worker's devices to ggml's registry before
the model loads, as llama-server's `--rpc` does; llama.cpp then offloads layers to them first.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

from server.core.llama.loading.ggml_devices import Device, device_api, ggml_devices
from server.core.llama.loading.native import shared_library
from server.core.scheduling.engine import EngineError
from server.devices.rpc_endpoints import reach_problem

# ggml's registry is one per process and cannot forget a device: a worker registered twice
# would be two devices. So this process remembers what it registered.
_registered: set[str] = set()


@dataclass(frozen=True)
class ServedDevice:
    device: Device
    handle: int  # ggml_backend_dev_t


class UnknownDeviceError(ValueError):
    pass


def devices_to_serve(names: Sequence[str]) -> list[ServedDevice]:
    """The devices named (ggml's names: `CPU`, `Vulkan0`, `CUDA1`), else every GPU, else the
    CPU: llama.cpp's rpc-server's rule. UnknownDeviceError names the ones there are."""
    ggml, _ = device_api()
    every = [
        ServedDevice(device, ggml.ggml_backend_dev_get(index))
        for index, device in enumerate(ggml_devices())
    ]
    if names:
        by_name = {served.device.name: served for served in every}
        missing = [name for name in names if name not in by_name]
        if missing:
            known = ", ".join(by_name)
            raise UnknownDeviceError(f"no device {', '.join(missing)} here (there are: {known})")
        return [by_name[name] for name in names]
    gpus = [served for served in every if served.device.takes_layers]
    return gpus or [served for served in every if served.device.kind == "CPU"][:1]


def serve_devices(endpoint: str, threads: int, devices: Sequence[ServedDevice]) -> None:
    """Serve `devices` over llama.cpp's RPC protocol at `endpoint` (host:port); blocks for
    good. `threads` is the CPU device's thread count."""
    rpc = ctypes.CDLL(str(shared_library("ggml-rpc")))
    start = rpc.ggml_backend_rpc_start_server
    start.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    start.restype = None
    handles = (ctypes.c_void_p * len(devices))(*(served.handle for served in devices))
    start(endpoint.encode(), None, threads, len(devices), handles)


def register_workers(endpoints: Sequence[str]) -> None:
    """Add each worker's devices to ggml's registry; before the model loads.

    Each worker is reached first: llama.cpp aborts the whole process when it cannot connect
    (`ggml_backend_rpc_add_server`), so an unreachable one is an EngineError naming it."""
    for endpoint in endpoints:
        problem = reach_problem(endpoint)
        if problem is not None:
            port = endpoint.rpartition(":")[2]
            raise EngineError(
                f"RPC worker {endpoint} is unreachable ({problem}); start it there with "
                f"`hearth rpc-worker --host <its address> --port {port}`"
            )
    rpc = ctypes.CDLL(str(shared_library("ggml-rpc")))
    add_server = rpc.ggml_backend_rpc_add_server
    add_server.argtypes, add_server.restype = [ctypes.c_char_p], ctypes.c_void_p
    ggml, _ = device_api()
    ggml.ggml_backend_register.argtypes, ggml.ggml_backend_register.restype = (
        [ctypes.c_void_p],
        None,
    )
    for endpoint in endpoints:
        if endpoint in _registered:
            continue
        registry = add_server(endpoint.encode())
        if not registry:
            raise EngineError(f"RPC worker {endpoint}: llama.cpp could not add it")
        ggml.ggml_backend_register(registry)
        _registered.add(endpoint)
