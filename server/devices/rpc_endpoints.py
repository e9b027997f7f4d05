"""RPC worker addresses (`--rpc HOST:PORT,…`) and whether each answers, without llama.cpp.

The supervising parent (`server/process/rpc_supervisor.py`) checks its workers with these and
never loads llama.cpp; the engine (`server/core/llama/loading/rpc.py`) checks them again before it
registers them, because llama.cpp aborts the whole process on one it cannot reach.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

REACH_TIMEOUT_SECONDS = 5.0


class RpcAddressError(ValueError):
    """An `--rpc` entry that is not HOST:PORT."""


def worker_endpoints(text: str) -> list[str]:
    """`--rpc`'s comma-separated HOST:PORT list; RpcAddressError for one that is not."""
    endpoints = [part.strip() for part in text.split(",") if part.strip()]
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise RpcAddressError(f"--rpc {endpoint}: expected HOST:PORT (e.g. 10.0.0.5:50052)")
    return endpoints


def reach_problem(endpoint: str) -> str | None:
    """Why `endpoint` does not accept a connection, or None when it does."""
    host, _, port = endpoint.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), REACH_TIMEOUT_SECONDS):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def unreachable_workers(endpoints: Sequence[str]) -> list[str]:
    return [endpoint for endpoint in endpoints if reach_problem(endpoint) is not None]
