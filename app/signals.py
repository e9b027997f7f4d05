"""SIGTERM and SIGINT close the launcher as its close button does.

A logout or a task manager sends SIGTERM; Ctrl-C in the terminal sends SIGINT. Either must stop
the server cleanly and save the preferences, which is what closing the window does.

Python runs its signal handlers only between bytecodes, and Qt's event loop sits in C++, so a
plain handler would wait for the next Qt event. Instead the C-level handler writes the signal
number to a socket (`signal.set_wakeup_fd`), a `QSocketNotifier` wakes the event loop on it,
and the window is closed from there, in ordinary event-loop context (not inside a handler that
may have interrupted anything). No polling timer.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Iterator
from types import FrameType
from typing import Any

from PySide6.QtCore import QSocketNotifier
from PySide6.QtWidgets import QWidget

CLOSING_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _note_signal(_signum: int, _frame: FrameType | None) -> None:
    """Only there so the signal is caught; the wakeup socket carries it to the event loop."""


@contextlib.contextmanager
def close_on_signals(
    window: QWidget, signals: tuple[signal.Signals, ...] = CLOSING_SIGNALS
) -> Iterator[None]:
    """While inside, each of `signals` closes `window`; the previous handlers and wakeup fd
    come back on the way out. Must be entered on the main thread."""
    receiver, sender = socket.socketpair()
    receiver.setblocking(False)
    sender.setblocking(False)
    wanted = {int(s) for s in signals}

    def on_readable() -> None:
        try:
            received = receiver.recv(4096)
        except OSError:  # nothing there after all (BlockingIOError) or already closed
            return
        if wanted.intersection(received):
            window.close()

    notifier = QSocketNotifier(receiver.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(on_readable)
    previous_handlers: dict[signal.Signals, Any] = {}
    previous_fd = signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
    try:
        for signum in signals:
            previous_handlers[signum] = signal.signal(signum, _note_signal)
        yield
    finally:
        for signum, handler in previous_handlers.items():
            # None: a handler installed outside Python, which cannot be put back from here.
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        signal.set_wakeup_fd(previous_fd)
        notifier.setEnabled(False)
        receiver.close()
        sender.close()
