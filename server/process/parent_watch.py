"""Stopping the server when the launcher that started it is gone.

The launcher (`app/server_process.py`) starts the server with `HEARTH_LAUNCHER_PIPE=1` and
keeps the write end of the server's stdin pipe open for as long as it lives. It never writes
to it. When the launcher ends for any reason (closed, SIGTERM from a logout, SIGKILL from a
task manager, a crash), the operating system closes its end of the pipe, and the server's
read of stdin returns end-of-file. That is the one signal that works the same on Linux, macOS
and Windows: Linux's parent-death signal (`PR_SET_PDEATHSIG`) has no equivalent elsewhere, and
polling the parent's pid races with pid reuse and misses a reparented process.

`stop` asks for the normal graceful shutdown. Should that not end the process (a signal lost
while the model loads, a hung request), the watcher ends it after `FORCE_EXIT_SECONDS`: an
orphan holding the port is worse than a skipped cleanup.

Without the variable nothing happens, so `hearth` run in a terminal (whose stdin is the
terminal, or /dev/null under a service manager) is never stopped by its stdin.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable

logger = logging.getLogger("hearth")

LAUNCHER_PIPE_VARIABLE = "HEARTH_LAUNCHER_PIPE"
FORCE_EXIT_SECONDS = 15.0  # a graceful shutdown takes a few seconds at most
EXIT_FORCED = 3


def launched_with_pipe() -> bool:
    return os.environ.get(LAUNCHER_PIPE_VARIABLE) == "1"


def stop_when_launcher_leaves(
    stop: Callable[[], None],
    fd: int | None = None,
    force_exit_after: float | None = FORCE_EXIT_SECONDS,
) -> None:
    """When started by the launcher, call `stop()` once stdin (or `fd`) reaches end-of-file,
    and end the process outright if it is still there `force_exit_after` seconds later (None:
    never).

    The watching happens on a daemon thread, so it never delays the server's own exit.
    """
    if not launched_with_pipe():
        return
    if fd is None:
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            return  # no usable stdin (pythonw, closed): nothing to watch
    threading.Thread(
        target=_watch,
        args=(fd, stop, force_exit_after),
        name="hearth-launcher-watch",
        daemon=True,
    ).start()


def _watch(fd: int, stop: Callable[[], None], force_exit_after: float | None) -> None:
    try:
        while os.read(fd, 4096):
            pass  # the launcher never writes; anything that arrives is ignored
    except OSError:
        pass  # a broken pipe means the same: the launcher is gone
    logger.info("The launcher has gone; stopping.")
    stop()
    if force_exit_after is None:
        return
    # A clean exit ends this daemon thread long before the wait is over.
    threading.Event().wait(force_exit_after)
    logger.error("hearth: still running %g s after the launcher left; exiting.", force_exit_after)
    os._exit(EXIT_FORCED)
