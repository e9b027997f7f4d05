"""What Hearth reaches in llama.cpp's libraries beyond llama-cpp-python's bindings: a persistent
ggml thread pool, llama.cpp's log and load-progress callbacks.

The thread-pool struct is copied by hand from ggml.h, so `check_struct_layouts()` asks ggml
itself to fill one at start-up and compares; on a mismatch (another llama-cpp-python than the
pinned one) the pool is not used and decoding still works, slower.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path
from typing import Any

import llama_cpp as llama

logger = logging.getLogger(__name__)

_GGML_MAX_N_THREADS = 512  # ggml.h
_GGML_SCHED_PRIO_NORMAL = 0
_GGML_DEFAULT_POLL = 50  # ggml's default hybrid polling, as llama-server uses
_GGML_LOG_LEVEL_ERROR = 4  # ggml.h of the vendored llama.cpp (not the older _logger.py table)


class GgmlThreadpoolParams(ctypes.Structure):
    """`struct ggml_threadpool_params` (ggml.h); llama-cpp-python does not bind it."""

    _fields_ = [
        ("cpumask", ctypes.c_bool * _GGML_MAX_N_THREADS),
        ("n_threads", ctypes.c_int),
        ("prio", ctypes.c_int),
        ("poll", ctypes.c_uint32),
        ("strict_cpu", ctypes.c_bool),
        ("paused", ctypes.c_bool),
    ]


def check_struct_layouts(
    params_type: type[ctypes.Structure] = GgmlThreadpoolParams,
) -> str | None:
    """None if the hand-copied struct (`params_type`) matches the loaded ggml, else what
    differs.

    `ggml_threadpool_params_init` fills a struct the way this ggml lays it out; filled into a
    buffer with guard bytes after our struct's size, our fields must read back ggml's defaults
    and the guard must be untouched (a larger C struct would write past it)."""
    try:
        base = ctypes.CDLL(str(shared_library("ggml-base")))
        init = base.ggml_threadpool_params_init
    except (OSError, AttributeError) as exc:
        return f"ggml-base cannot be bound: {exc}"
    init.argtypes, init.restype = [ctypes.c_void_p, ctypes.c_int], None
    size = ctypes.sizeof(params_type)
    guard = 64
    buffer = ctypes.create_string_buffer(b"\xa5" * (size + guard), size + guard)
    init(buffer, 3)
    params: Any = params_type.from_buffer_copy(buffer.raw[:size])
    names = ("n_threads", "prio", "poll", "strict_cpu", "paused")
    read = tuple(getattr(params, name, None) for name in names)
    expected = (3, _GGML_SCHED_PRIO_NORMAL, _GGML_DEFAULT_POLL, False, False)
    if read != expected:
        return f"ggml_threadpool_params reads {read}, expected {expected}"
    if any(params.cpumask) or buffer.raw[size:] != b"\xa5" * guard:
        return "ggml_threadpool_params is laid out differently (cpumask or size)"
    return None


class Threadpool:
    """A persistent ggml thread pool attached to the context, as llama-server does.

    Without one, ggml creates and joins a new pool for every decode (so per token), and its
    threads never get to spin-wait between graph nodes. Measured on the bundled model: this is
    where Hearth lost ~10% of decode speed and prompt speed to llama-server. When the
    libraries cannot be bound (another platform's file names), decoding still works, slower.
    """

    def __init__(self, pool: int, free: Any) -> None:
        self._pool = pool
        self._free = free

    @classmethod
    def attach(cls, context: Any, threads: int) -> Threadpool | None:
        mismatch = check_struct_layouts()
        if mismatch is not None:
            logger.warning("No persistent thread pool (%s); decoding is slower.", mismatch)
            return None
        try:
            cpu = ctypes.CDLL(str(shared_library("ggml-cpu")))
            new, free = cpu.ggml_threadpool_new, cpu.ggml_threadpool_free
            new.argtypes, new.restype = [ctypes.POINTER(GgmlThreadpoolParams)], ctypes.c_void_p
            free.argtypes, free.restype = [ctypes.c_void_p], None
            attach = libllama().llama_attach_threadpool
            attach.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            attach.restype = None
        except (OSError, AttributeError, KeyError):
            logger.info("No persistent thread pool on this platform; decoding is slower.")
            return None
        params = GgmlThreadpoolParams(n_threads=threads, prio=0, poll=_GGML_DEFAULT_POLL)
        pool = new(ctypes.byref(params))
        if not pool:
            return None
        attach(context, pool, pool)
        return cls(pool, free)

    def detach(self, context: Any) -> None:
        detach = libllama().llama_detach_threadpool
        detach.argtypes, detach.restype = [ctypes.c_void_p], None
        detach(context)
        self._free(self._pool)


def libllama() -> Any:
    """llama-cpp-python's handle on libllama, for the functions it does not bind."""
    import llama_cpp.llama_cpp as bindings

    return vars(bindings)["_lib"]


def shared_library(stem: str) -> Path:
    """The file of ggml library `stem` that this process already uses.

    llama-cpp-python ships each library as separate copies (`libggml-cpu.so`, `.so.0`,
    `.so.0.25.3`), and libllama pulled in the one named by its SONAME (`.so.0`). Opening another
    copy would map the library twice, with its own globals (a second device registry once GPU or
    RPC backends are registered): so the copy already mapped is taken, then the SONAME one.
    """
    loaded = _mapped_library(stem)
    if loaded is not None:
        return loaded
    folder = Path(llama.__file__).resolve().parent / "lib"
    for pattern in (f"lib{stem}.so.[0-9]", f"lib{stem}.so", f"lib{stem}.dylib", f"{stem}.dll"):
        found = sorted(folder.glob(pattern))
        if found:
            return found[0]
    raise OSError(f"{stem} not found in {folder}")


def _mapped_library(stem: str) -> Path | None:
    """The file of `lib<stem>` mapped into this process (Linux; None elsewhere)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith(f"lib{stem}.so"):
            return Path(fields[5])
    return None


class ProgressReporter:
    """llama.cpp's load-progress callback, logging each further 10%."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._next_step = 0

    def __call__(self, progress: float, _user_data: Any) -> bool:
        percent = int(progress * 100)
        if percent >= self._next_step:
            logger.info("Loading %s: %d%%", self._label, percent)
            self._next_step = (percent // 10 + 1) * 10
        return True  # keep loading


def _forward_llama_log(level: int, text: bytes, _user_data: Any) -> None:
    # llama.cpp narrates every load in detail (and warns about harmless quirks of many GGUFs);
    # the console keeps only its errors, so Hearth's own progress lines stay readable.
    if level == _GGML_LOG_LEVEL_ERROR:
        logger.error("llama.cpp: %s", text.decode("utf-8", errors="replace").rstrip())


# Kept at module level: llama.cpp holds the C pointer for as long as the process lives.
_LLAMA_LOG_CALLBACK = llama.llama_log_callback(_forward_llama_log)


def quiet_llama_logs() -> None:
    llama.llama_log_set(_LLAMA_LOG_CALLBACK, ctypes.c_void_p(0))
