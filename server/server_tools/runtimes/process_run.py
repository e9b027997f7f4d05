"""Running one command for a server tool: its output as it comes, a cap, a deadline, a stop.

exec_shell_command streams what a command prints while it runs, so the output is read raw (bytes
as they arrive, not lines) and handed on at once. The caps and the deadline keep a runaway
command from filling the answer or holding a worker thread. The command runs in a session of its
own, so that a stop or a timeout ends everything it started (a pipeline, a background job), not
only the shell; a command that is stopped gets SIGTERM, then SIGKILL after a short grace.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Receives the output as text, piece by piece (whole UTF-8 characters only).
OnChunk = Callable[[str], None]

POLL_S = 0.05  # how often the watchdog looks at the deadline and the stop flag
KILL_GRACE_S = 1.0  # between SIGTERM and SIGKILL
READ_SIZE = 64 * 1024
STDERR_KEPT = 64 * 1024  # of a separate stderr, only the start is kept (for error messages)
_SIGKILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # Windows has no SIGKILL


def _never() -> bool:
    return False


@dataclass
class ExecResult:
    """How a command ended: its output (capped), exit status and why it ended early.

    `exit_code` is the process's status, negative when a signal ended it (-9: killed).
    """

    output: bytes
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
    stopped: bool = False
    stderr: bytes = b""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.stopped

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def error_text(self) -> str:
        """What the command said went wrong (its stderr, else its output), on one line."""
        said = (self.stderr or self.output).decode("utf-8", "replace").strip()
        return " ".join(said.split())[:500]


def run_process(
    argv: Sequence[str],
    *,
    max_output: int,
    timeout: float,
    cwd: str | None = None,
    stdin_data: bytes | None = None,
    on_chunk: OnChunk | None = None,
    should_stop: Callable[[], bool] = _never,
    combine_stderr: bool = True,
) -> ExecResult:
    """Run `argv` to its end, its deadline or a stop, and return what it printed.

    The output past `max_output` bytes is read and dropped (a child blocked on a full pipe
    would never end). With `combine_stderr` False, stderr is kept apart (`ExecResult.stderr`)
    so that it cannot mix into raw bytes such as a file's content. Raises OSError when the
    command cannot be started (no such program, no such working directory).
    """
    with tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if combine_stderr else err_file,
            start_new_session=True,
        )
        watchdog = _Watchdog(proc, timeout, should_stop)
        try:
            if stdin_data is not None:
                _feed_stdin(proc, stdin_data)
            assert proc.stdout is not None
            output, truncated = _read_output(proc.stdout.fileno(), max_output, on_chunk)
            exit_code = proc.wait()
        finally:
            watchdog.finish()
            _reap(proc)
        err_file.seek(0)
        stderr = err_file.read(STDERR_KEPT)
    return ExecResult(
        output=output,
        exit_code=exit_code,
        timed_out=watchdog.timed_out,
        truncated=truncated,
        stopped=watchdog.stopped,
        stderr=stderr,
    )


def _feed_stdin(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Write the input on a thread of its own: a child may print before it has read it all."""
    stdin = proc.stdin
    assert stdin is not None

    def feed() -> None:
        with contextlib.suppress(OSError):  # the child may exit without reading it all
            stdin.write(data)
        with contextlib.suppress(OSError):
            stdin.close()

    threading.Thread(target=feed, name="tool-stdin", daemon=True).start()


def _read_output(fd: int, max_output: int, on_chunk: OnChunk | None) -> tuple[bytes, bool]:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    kept = bytearray()
    truncated = False
    while chunk := os.read(fd, READ_SIZE):
        if truncated:
            continue  # keep draining: a child blocked on a full pipe never ends
        room = max_output - len(kept)
        if len(chunk) > room:
            chunk, truncated = chunk[:room], True
        kept += chunk
        if on_chunk is not None and (text := decoder.decode(chunk)):
            on_chunk(text)
    if on_chunk is not None and (tail := decoder.decode(b"", final=True)):
        on_chunk(tail)
    return bytes(kept), truncated


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """After an exception mid-read the command may still run: end its group and wait for it."""
    if proc.poll() is None:
        _signal_group(proc, _SIGKILL)
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # the group outlives its leader while a background job of the command still runs
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, sig)
        else:  # Windows has no process groups to signal: the process alone
            proc.kill()


class _Watchdog:
    """Ends the command's process group at the deadline or when `should_stop` turns true."""

    def __init__(
        self, proc: subprocess.Popen[bytes], timeout: float, should_stop: Callable[[], bool]
    ) -> None:
        self.timed_out = False
        self.stopped = False
        self._proc = proc
        self._deadline = time.monotonic() + max(0.0, timeout)
        self._should_stop = should_stop
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tool-watchdog", daemon=True)
        self._thread.start()

    def finish(self) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(POLL_S):
            if self._should_stop():
                self.stopped = True
                break
            if time.monotonic() >= self._deadline:
                self.timed_out = True
                break
        else:
            return
        _signal_group(self._proc, signal.SIGTERM)
        # a command that ignores SIGTERM (or a background job that keeps the pipe) gets KILL
        if not self._done.wait(KILL_GRACE_S):
            _signal_group(self._proc, _SIGKILL)
