"""`hearth rpc-worker`: lend this machine's devices to a Hearth elsewhere (llama.cpp's RPC).

    hearth rpc-worker [--host 127.0.0.1] [--port 50052] [--threads N] [--device NAME[,NAME]]

llama.cpp's RPC protocol has no authentication and trusts what it is sent, so the worker
listens on loopback unless told otherwise and warns when it is not. Ctrl-C (or SIGTERM) stops
it cleanly; the RPC server itself runs in a thread, since ggml's accept loop never returns.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence

from server.base.netcheck import is_loopback, port_in_use
from server.process.exit_codes import EXIT_USAGE

DEFAULT_PORT = 50052  # llama.cpp's rpc-server's


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hearth rpc-worker",
        description="Serve this machine's devices to another Hearth over llama.cpp's RPC "
        "protocol (its --rpc HOST:PORT). No authentication: use only on a trusted network.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port (default 50052)")
    parser.add_argument(
        "--threads",
        type=int,
        default=max(1, (os.cpu_count() or 2) // 2),
        help="threads of the CPU device (default: half the cores)",
    )
    parser.add_argument(
        "--device",
        default="",
        metavar="NAME[,NAME]",
        help="ggml devices to serve, e.g. CPU or Vulkan0 (default: every GPU, else the CPU)",
    )
    return parser


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(arguments: Sequence[str]) -> int:
    options = build_parser().parse_args(list(arguments))
    if not 1 <= options.port <= 65535 or options.threads < 1:
        sys.stderr.write("hearth rpc-worker: --port is 1-65535 and --threads at least 1\n")
        return EXIT_USAGE
    # Checked first: ggml would exit with a bare message of its own.
    if port_in_use(options.host, options.port):
        sys.stderr.write(
            f"hearth rpc-worker: cannot listen on {options.host}:{options.port} (the port is "
            "in use, or the address is not this computer's)\n"
        )
        return EXIT_USAGE
    from server.core.llama.loading.rpc import UnknownDeviceError, devices_to_serve, serve_devices

    names = [name.strip() for name in options.device.split(",") if name.strip()]
    try:
        devices = devices_to_serve(names)
    except UnknownDeviceError as exc:
        sys.stderr.write(f"hearth rpc-worker: {exc}\n")
        return EXIT_USAGE
    endpoint = f"{options.host}:{options.port}"
    served = "; ".join(served.device.summary() for served in devices)
    say(f"RPC worker on {endpoint}, serving {served}, {options.threads} CPU threads.")
    say("llama.cpp's RPC has no authentication: use it only on a trusted network.")
    if not is_loopback(options.host):
        say(
            f"WARNING: listening on {options.host}, not loopback: anyone who can reach this "
            "port can run code on these devices and read what they hold."
        )
    # Before the last line: whoever reads it may press Ctrl-C at once.
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    say(f"Use it from Hearth with: --rpc {endpoint}  (Ctrl-C stops the worker)")
    worker = threading.Thread(
        target=serve_devices, args=(endpoint, options.threads, devices), daemon=True
    )
    worker.start()
    while not stop.wait(0.5):
        if not worker.is_alive():  # ggml gave up (it printed why)
            sys.stderr.write("hearth rpc-worker: the RPC server stopped\n")
            return 1
    say("RPC worker stopped.")
    # ggml's accept loop cannot be interrupted: leave without waiting for its thread (or for
    # interpreter teardown while it is inside llama.cpp).
    os._exit(0)
