"""Running a server whose layers live on RPC workers as a child process it watches.

llama.cpp's RPC client aborts its whole process when a worker vanishes mid-run (`GGML_ABORT`
in ggml-rpc.cpp): nothing in that process can catch it. So `hearth --rpc …` runs the real
server as a child and waits for it; if the child dies from a signal, this process finds which
workers no longer answer and says so as its last line, exiting 1. (Open requests end with a
closed connection: the process that held them is gone. Restarting the engine in a child of
its own, so that the HTTP side survives, is the fuller design; docs/SCALING.md says why this
one was built first.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

SUPERVISED_ENV = "HEARTH_RPC_SUPERVISED"  # set in the child: it serves instead
EXIT_WORKER_LOST = 1


def supervised() -> bool:
    return os.environ.get(SUPERVISED_ENV) == "1"


def _server_command(arguments: Sequence[str]) -> list[str]:
    if getattr(sys, "frozen", False):  # the packaged binary is its own interpreter
        return [sys.executable, *arguments]
    return [sys.executable, "-m", "server", *arguments]


def run_supervised(arguments: Sequence[str], endpoints: Sequence[str]) -> int:
    """Serve in a child process; its exit code, or EXIT_WORKER_LOST naming the lost worker."""
    from server.devices.rpc_endpoints import unreachable_workers

    environment = {**os.environ, SUPERVISED_ENV: "1", "GGML_NO_BACKTRACE": "1"}
    # Its own process group (POSIX): a Ctrl-C in the terminal reaches only this process, which
    # passes it on once (a server that got two would take the second as "stop now").
    own_group = 0 if os.name == "posix" else None
    child = subprocess.Popen(_server_command(arguments), env=environment, process_group=own_group)
    # SIGHUP too where there is one: the server re-reads its --api-key-file on it.
    passed_on = [
        signal.SIGINT,
        signal.SIGTERM,
        *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else []),
    ]
    for signum in passed_on:
        signal.signal(signum, lambda number, _frame: child.send_signal(number))
    code = child.wait()
    if code >= 0:
        return code
    lost = unreachable_workers(endpoints)
    if lost:
        sys.stderr.write(
            f"hearth: stopped: lost RPC worker {', '.join(lost)}; llama.cpp cannot go on "
            "without the layers it held. Restart the worker, then Hearth.\n"
        )
    else:
        sys.stderr.write(f"hearth: the server ended on signal {-code}\n")
    return EXIT_WORKER_LOST
