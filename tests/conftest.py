"""Shared fixtures: the real server in a subprocess, and an in-process server for scripted tests.

Both speak real HTTP on loopback. The real one runs `python -m server` exactly as a user would,
on the bundled Gemma 3 270M model.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from server.core.engine import Engine
from server.models.files import resolve_model_path
from server.process.app import create_app
from server.process.http_server import http_server
from server.settings.config import HearthSettings
from tests.hub_server import STORY_FILE, LocalHub, renamed_copy, serve_hub

ROOT = Path(__file__).resolve().parent.parent
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
    # In-process servers (serve_engine): the uvicorn server and the thread running it.
    http: uvicorn.Server | None = None
    thread: threading.Thread | None = None

    def shut_down(self, timeout: float = 30.0) -> None:
        """Stop an in-process server as a signal would, and wait until it has stopped."""
        assert self.http is not None and self.thread is not None
        self.http.should_exit = True
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the server did not stop"

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=60.0, **kwargs)  # type: ignore[arg-type]

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


def wait_until_ready(base_url: str, process: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} during startup")
        try:
            if httpx.get(f"{base_url}/api/extra/version", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)  # a readiness poll, not a test assertion
    raise RuntimeError("server did not become ready")


@pytest.fixture(scope="session")
def start_hearth() -> Iterator[Callable[..., RunningServer]]:
    """Start `python -m server` with extra flags; every server started is stopped at the end."""
    started: list[RunningServer] = []

    def start(
        args: Sequence[str] = (), *, env: dict[str, str] | None = None, stdin: int | None = None
    ) -> RunningServer:
        """`env` adds environment variables; `stdin=subprocess.PIPE` gives the server a stdin
        pipe (as the launcher does), at `server.process.stdin`."""
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
        server = RunningServer(f"http://127.0.0.1:{port}", process)
        threading.Thread(target=_pump_output, args=(server,), daemon=True).start()
        started.append(server)
        wait_until_ready(server.base_url, process)
        return server

    yield start
    for server in started:
        stop_process(server)


def stop_process(server: RunningServer) -> int:
    assert server.process is not None
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
        try:
            server.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
    return server.process.returncode


@pytest.fixture(scope="session")
def hearth(start_hearth: Callable[[Sequence[str]], RunningServer]) -> RunningServer:
    """The real server with default settings on the bundled model."""
    return start_hearth([])


@pytest.fixture
def serve_engine() -> Iterator[Callable[..., RunningServer]]:
    """Run create_app(settings, engine) under uvicorn in a thread, on a free loopback port."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def serve(
        engine: Engine,
        settings: HearthSettings | None = None,
        keepalive_seconds: float = 5.0,
        **app_options: Any,
    ) -> RunningServer:
        port = free_port()
        app = create_app(
            settings or HearthSettings(),
            engine,
            keepalive_seconds=keepalive_seconds,
            **app_options,
        )
        server = http_server(app, "127.0.0.1", port)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        base_url = f"http://127.0.0.1:{port}"
        wait_until_ready(base_url)
        return RunningServer(base_url, http=server, thread=thread)

    yield serve
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, story_model: Path) -> Iterator[LocalHub]:
    """A local stand-in for the Hugging Face Hub (tests/hub_server.py) with repositories made
    of the bundled model and its renamed copy; huggingface_hub points at it for this test."""
    local = serve_hub(resolve_model_path(None), tmp_path, monkeypatch, story_model)
    yield local
    local.stop()


@pytest.fixture(scope="session")
def story_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled GGUF with another `general.name` (tests/hub_server.renamed_copy): a second
    model for the hub tests, made once per session (~15 s on 2 cores)."""
    folder = tmp_path_factory.mktemp("story-model")
    return renamed_copy(resolve_model_path(None), folder / STORY_FILE)
