"""Hearth servers for tests, over real HTTP on loopback: the real `python -m server` in a
subprocess (on the bundled Gemma 3 270M model unless told otherwise), and `create_app` under
uvicorn in a thread for scripted tests. The fixtures in tests/conftest.py start and stop them.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from server.core.scheduling.engine import Engine
from server.process.app import create_app
from server.process.http_server import http_server
from server.process.tls import TlsFiles
from server.settings.config import HearthSettings

ROOT = Path(__file__).resolve().parent.parent.parent
STARTUP_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningServer:
    """A Hearth server reachable at `base_url`, with what it printed so far in `output`."""

    base_url: str
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)
    output_changed: threading.Condition = field(default_factory=threading.Condition)
    # In-process servers (serve_in_thread): the uvicorn server and the thread running it.
    http: uvicorn.Server | None = None
    thread: threading.Thread | None = None
    # An HTTPS server's trust store (base_url is https://): what its clients verify it with.
    trust: ssl.SSLContext | None = None

    def shut_down(self, timeout: float = 30.0) -> None:
        """Stop an in-process server as a signal would, and wait until it has stopped."""
        assert self.http is not None and self.thread is not None
        self.http.should_exit = True
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the server did not stop"

    def client(self, **kwargs: object) -> httpx.Client:
        verify = self.trust or True
        return httpx.Client(base_url=self.base_url, timeout=60.0, verify=verify, **kwargs)  # type: ignore[arg-type]

    def wait_for_output(self, text: str, timeout: float = 10.0, after: int = 0) -> str:
        """Block until a printed line (from line `after` on) contains `text`; return it."""
        deadline = time.monotonic() + timeout
        with self.output_changed:
            while True:
                for line in self.output[after:]:
                    if text in line:
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"server never printed {text!r}:\n" + "".join(self.output))
                self.output_changed.wait(remaining)


def _pump_output(server: RunningServer) -> None:
    assert server.process is not None and server.process.stdout is not None
    for line in server.process.stdout:
        with server.output_changed:
            server.output.append(line)
            server.output_changed.notify_all()


def wait_until_ready(
    base_url: str,
    process: subprocess.Popen[str] | None = None,
    trust: ssl.SSLContext | None = None,
) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} during startup")
        try:
            version = httpx.get(f"{base_url}/api/extra/version", timeout=1.0, verify=trust or True)
            if version.status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)  # a readiness poll, not a test assertion
    raise RuntimeError("server did not become ready")


def start_subprocess(
    args: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    stdin: int | None = None,
    trust: ssl.SSLContext | None = None,
) -> RunningServer:
    """`python -m server --skiplauncher` on a free port with extra flags, once it answers.
    `env` adds environment variables; `stdin=subprocess.PIPE` gives the server a stdin pipe
    (as the launcher does), at `server.process.stdin`; `trust`: the server serves HTTPS (its
    flags name the files) with a certificate this context trusts. Stop it with `stop_process`."""
    port = free_port()
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    command = [
        sys.executable,
        "-m",
        "server",
        "--skiplauncher",
        "--port",
        str(port),
        "--contextsize",
        "4096",
        *args,
    ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=environment,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
    )
    scheme = "http" if trust is None else "https"
    server = RunningServer(f"{scheme}://127.0.0.1:{port}", process, trust=trust)
    threading.Thread(target=_pump_output, args=(server,), daemon=True).start()
    try:
        wait_until_ready(server.base_url, process, trust)
    except BaseException:
        stop_process(server)
        raise
    return server


def ask_to_stop(server: RunningServer) -> None:
    """Send the server Ctrl-C and return at once (stop_process then waits for it)."""
    assert server.process is not None
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)


def wait_stopped(server: RunningServer) -> int:
    """Wait for a server asked to stop (killed after 20 s); its exit status."""
    assert server.process is not None
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    return server.process.returncode


def stop_process(server: RunningServer) -> int:
    ask_to_stop(server)
    return wait_stopped(server)


def serve_in_thread(
    engine: Engine,
    settings: HearthSettings | None = None,
    keepalive_seconds: float = 5.0,
    tls: TlsFiles | None = None,
    **app_options: Any,
) -> RunningServer:
    """create_app(settings, engine) under uvicorn in a daemon thread, on a free loopback port,
    once it answers (over HTTPS with `tls`). Stop it with `RunningServer.shut_down`."""
    port = free_port()
    app = create_app(
        settings or HearthSettings(), engine, keepalive_seconds=keepalive_seconds, **app_options
    )
    server = http_server(app, "127.0.0.1", port, tls=tls)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    scheme = "http" if tls is None else "https"
    running = RunningServer(f"{scheme}://127.0.0.1:{port}", http=server, thread=thread)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    # uvicorn sets `started` once it listens (and the app's startup ran): a short poll of a
    # flag, where an HTTP poll would wait a whole step after the first refused connection.
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the in-process server did not start")
        time.sleep(0.002)
    return running
