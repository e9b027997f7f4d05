"""A guard against a reference-count bug of PySide6 6.12 on CPython 3.11.

There, a Qt call that returns `None`, `True` or `False` gives back a reference it never took:
every `QLabel.setText`, `QPainter.drawLine`, `QWidget.setEnabled` drops one reference to
`None`, every `Signal.emit` one to `True` (measured with `sys.getrefcount`). Python 3.12 made
these objects immortal (PEP 683), so it is harmless there; on 3.11 they start with a few
thousand references, the running view's polls, signals and plot painting use them up within
minutes, and the interpreter aborts ("none_dealloc: deallocating None", "bool_dealloc").
`keep_singletons_alive()` gives them the huge count an immortal object has, once, before any
window exists: they are never freed anyway, so the lost references simply stop mattering.
"""

from __future__ import annotations

import ctypes
import sys

_IMMORTAL_COUNT = 1 << 40  # decades of lost references at any rate a GUI reaches


def keep_singletons_alive() -> bool:
    """Make the reference counts of None, True and False unreachably high where they are
    counted (CPython before 3.12); True if done."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False  # immortal already, or not CPython's object layout
    for singleton in (None, True, False):
        # In a release build `ob_refcnt` is an object's first field; a debug build puts other
        # fields first, so the field is checked against what the interpreter reports.
        count = ctypes.c_ssize_t.from_address(id(singleton))
        if abs(count.value - sys.getrefcount(singleton)) > 8:
            return False
        if count.value < _IMMORTAL_COUNT:
            count.value += _IMMORTAL_COUNT
    return True
