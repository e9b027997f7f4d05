"""The container `--tools-runtime docker:<image>` (or `podman:<image>`) starts and owns.

The server starts `<engine> run --rm -i --cidfile <file> <image> sh` once, at launch, and keeps
its stdin open: the container's shell waits on it, so the container lives until the server
closes that stdin at shutdown (then `--rm` removes it). Every tool call attaches to it as
`<engine>-container:<id>`; a container that died on its own is started again on the next call.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from server.server_tools.registry import ToolRefused
from server.server_tools.runtimes.runtimes import ContainerSpec

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class SpawnedContainer:
    """One started container. `spec()` per call, `close()` once at shutdown."""

    def __init__(self, container: ContainerSpec, start_timeout: float = START_TIMEOUT_S) -> None:
        self.engine = container.engine
        self.image = container.name
        self._start_timeout = start_timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._container_id = ""
        self._closed = False

    @classmethod
    def start(
        cls, container: ContainerSpec, start_timeout: float = START_TIMEOUT_S
    ) -> SpawnedContainer:
        """Start the container now (at launch: a wrong image fails the launch, not a call)."""
        spawned = cls(container, start_timeout)
        with spawned._lock:
            spawned._spawn()
        return spawned

    def spec(self) -> str:
        """The runtime spec of the running container, started again if it has died."""
        with self._lock:
            if self._closed:
                raise ToolRefused("the tools runtime container has been stopped")
            if self._proc is None or self._proc.poll() is not None:
                self._spawn()
            return f"{self.engine}-container:{self._container_id}"

    def close(self) -> None:
        """Close the shell's stdin (the container then exits and is removed) and wait for it."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _spawn(self) -> None:
        with tempfile.TemporaryDirectory(prefix="hearth-tools-") as folder:
            cidfile = Path(folder) / "cid"  # the engine refuses a cidfile that exists
            argv = [self.engine, "run", "--rm", "-i", "--cidfile", str(cidfile), self.image, "sh"]
            with tempfile.TemporaryFile() as errors:
                try:
                    proc = subprocess.Popen(
                        argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors
                    )
                except OSError as err:
                    raise ToolRefused(f"failed to start {self.engine}: {err}") from err
                self._container_id = self._wait_for_id(proc, cidfile, errors)
        self._proc = proc

    def _wait_for_id(self, proc: subprocess.Popen[bytes], cidfile: Path, errors: IO[bytes]) -> str:
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError):
                container_id = cidfile.read_text().strip()
                if container_id:
                    return container_id
            time.sleep(0.1)
        timed_out = proc.poll() is None
        if timed_out:
            proc.kill()
        proc.wait()
        errors.seek(0)
        said = " ".join(errors.read(2000).decode("utf-8", "replace").split())
        what = "timed out waiting for" if timed_out else "failed to start"
        raise ToolRefused(
            f"{what} {self.engine} container (image: {self.image})" + (f": {said}" if said else "")
        )
