"""The byte side of MCP's stdio transport: a child's output read as lines, its input written.

`OutputPump` is one thread per MCP server process that reads its stdout and stderr with
`select`, never a blocking read to EOF: a grandchild the server left running can hold the
pipes' write ends open, so EOF may never come, and stopping must not wait for it (a self-pipe
wakes the thread at once). stderr is read as eagerly as stdout, since a server whose stderr
pipe fills up stops. `write_all` writes to a non-blocking pipe a slice at a time, so that a
server that stopped reading holds a writer only until its deadline.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_LINE_BYTES = 8 * 1024 * 1024  # a longer line is dropped, so memory stays bounded
READ_CHUNK = 64 * 1024
LIVENESS_CHECK_S = 0.2  # how often an idle pump looks whether the process is still there
WRITE_SLICE_S = 0.05

OnLine = Callable[[bytes], None]


class PipeClosed(Exception):
    """The pipe's reader has gone (or the write was called off): nothing more can be sent."""


class PipeStalled(Exception):
    """The reader stopped reading: the deadline passed with the pipe still full."""


class LineSplitter:
    """Bytes as they come, whole lines out (blank ones skipped); an over-long line is dropped."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._dropping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        start = len(self._pending)
        self._pending += chunk
        lines = []
        end = self._pending.find(b"\n", start)  # what came before holds no newline
        while end >= 0:
            line = bytes(self._pending[:end]).strip()
            del self._pending[: end + 1]
            if self._dropping:
                self._dropping = False
            elif line:
                lines.append(line)
            end = self._pending.find(b"\n")
        if len(self._pending) > MAX_LINE_BYTES:
            self._pending.clear()
            self._dropping = True
        return lines


@dataclass
class _Stream:
    splitter: LineSplitter
    on_line: OnLine
    is_stdout: bool


class OutputPump:
    """Reads a child's stdout and stderr, line by line, on a thread of its own.

    `on_end` is called once when no more stdout can come (it closed, or the child is gone
    while something else holds the pipe), not when `stop()` ended the reading.
    """

    def __init__(
        self,
        name: str,
        fds: tuple[int, int],
        on_lines: tuple[OnLine, OnLine],
        still_running: Callable[[], bool],
        on_end: Callable[[], None],
    ) -> None:
        stdout_fd, stderr_fd = fds
        self._streams = {
            stdout_fd: _Stream(LineSplitter(), on_lines[0], True),
            stderr_fd: _Stream(LineSplitter(), on_lines[1], False),
        }
        self._stderr_fd = stderr_fd
        self._still_running = still_running
        self._on_end = on_end
        self._stopping = threading.Event()
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(target=self._run, name=f"mcp-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop reading now (whatever the pipes hold)."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")

    def join(self, timeout: float) -> bool:
        """Whether the thread has finished (then its pipes may be closed)."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        finished = not self._thread.is_alive()
        if finished:
            for fd in (self._wake_read, self._wake_write):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake_read = self._wake_write = -1
        return finished

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_read, selectors.EVENT_READ)
            for fd in self._streams:
                selector.register(fd, selectors.EVENT_READ)
            while not self._stopping.is_set() and self._read_ready(selector):
                pass
        if not self._stopping.is_set():
            self._read_stderr_left()
            self._on_end()

    def _read_ready(self, selector: selectors.BaseSelector) -> bool:
        """Read what is ready; False once no more stdout can come."""
        ready = selector.select(LIVENESS_CHECK_S)
        if not ready:
            # Gone, though a grandchild may still hold its pipes open (so no EOF).
            return self._still_running()
        for key, _ in ready:
            stream = self._streams.get(key.fd)
            if stream is None:
                continue  # the wake pipe: the loop sees `_stopping`
            chunk = read_some(key.fd)
            if chunk is None:
                continue
            if not chunk:
                selector.unregister(key.fd)
                if stream.is_stdout:
                    return False
                continue
            for line in stream.splitter.feed(chunk):
                stream.on_line(line)
        return True

    def _read_stderr_left(self) -> None:
        # Its last words (a traceback) are already in the pipe when its stdout closes.
        stream = self._streams[self._stderr_fd]
        for _ in range(64):
            chunk = read_some(self._stderr_fd)
            if not chunk:
                return
            for line in stream.splitter.feed(chunk):
                stream.on_line(line)


def read_some(fd: int) -> bytes | None:
    """What a non-blocking pipe holds: b"" at its end, None when nothing after all."""
    try:
        return os.read(fd, READ_CHUNK)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


def write_all(fd: int, data: bytes, deadline: float, called_off: Callable[[], bool]) -> None:
    """Write all of `data` to a non-blocking pipe. Raises PipeClosed or PipeStalled."""
    view = memoryview(data)
    while view:
        if called_off():
            raise PipeClosed("the write was called off")
        try:
            view = view[os.write(fd, view) :]
        except (BlockingIOError, InterruptedError):
            if time.monotonic() >= deadline:
                raise PipeStalled("the pipe stayed full") from None
            select.select([], [fd], [], WRITE_SLICE_S)  # wait for room, a slice at a time
        except OSError as exc:  # a broken pipe: the reader has gone
            raise PipeClosed(str(exc)) from exc
