"""Where a built-in tool runs: the few operations every tool is written against.

A tool never touches the file system or starts a process itself: it asks a `Runtime` (this
machine, a running container, an ssh host) to resolve a path, look at it, read or write it,
list a folder or run a command. The tools are then the same on every runtime, and a runtime
that is not this machine cannot be bypassed by a tool that forgot about it.
"""

from __future__ import annotations

import enum
import errno
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from server.server_tools.runtimes.process_run import ExecResult, OnChunk

# Folders a listing reports but never walks into: they can be enormous (llama-server's list).
JUNK_DIR_NAMES = frozenset(
    {
        ".git",
        ".svn",
        ".hg",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        "dist",
        "build",
        "target",
        ".cache",
        ".idea",
        ".vscode",
    }
)

# How long one listing (git ls-files, then the walk) may take before it answers with what it has.
LISTING_BUDGET_S = 15.0
GIT_LS_FILES_MAX_OUTPUT = 8 * 1024 * 1024


def _never() -> bool:
    return False


class ListKind(enum.Enum):
    """What a listing returns; the values are file_glob_search's `type`."""

    FILES = "file"
    DIRS = "dir"
    ALL = "all"

    @property
    def wants_files(self) -> bool:
        return self is not ListKind.DIRS

    @property
    def wants_dirs(self) -> bool:
        return self is not ListKind.FILES


@dataclass(frozen=True)
class Entry:
    """One listed path: '/'-separated, relative to the listed folder."""

    rel: str
    is_dir: bool = False


@dataclass
class Listing:
    entries: list[Entry] = field(default_factory=list)
    truncated: bool = False  # the time ran out, or a folder could not be read


@dataclass(frozen=True)
class PathInfo:
    kind: Literal["missing", "file", "dir", "other"]
    size: int = 0


@dataclass(frozen=True)
class Budget:
    """A deadline, and the call's stop flag: a search stops at whichever comes first."""

    deadline: float
    should_stop: Callable[[], bool] = _never

    @classmethod
    def of(cls, seconds: float, should_stop: Callable[[], bool] = _never) -> Budget:
        return cls(time.monotonic() + seconds, should_stop)

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline or self.should_stop()


def too_large(limit: int) -> OSError:
    return OSError(errno.EFBIG, f"file larger than {limit} bytes")


def entry_depth(rel: str) -> int:
    """How deep a relative path lies: "a" is 1, "a/b/c" is 3."""
    return rel.count("/") + 1


class Runtime(ABC):
    """The machine a call's tools act on. Paths given to the methods are already resolved.

    Failures to read or write are OSError (its message says why); `run` raises OSError only
    when the command cannot be started at all.
    """

    is_host: bool = False
    # the working directory of the call (x-tool-cwd), as the runtime sees it
    cwd: str | None = None

    @abstractmethod
    def resolve(self, path: str) -> str:
        """The absolute form of `path`: relative paths are taken from the call's cwd."""

    @abstractmethod
    def stat(self, path: str) -> PathInfo: ...

    @abstractmethod
    def read_bytes(self, path: str, limit: int) -> bytes:
        """The file's bytes; OSError (EFBIG) when it holds more than `limit` of them."""

    @abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace the file, creating its parent folders first."""

    @abstractmethod
    def list_entries(self, base: str, max_depth: int, kind: ListKind, budget: Budget) -> Listing:
        """The entries under the folder `base` (0 = any depth, 1 = its children only).

        Files come from `git ls-files` when `base` lies in a git work tree (so .gitignore
        applies), else from a walk that skips the junk folders and never follows a link.
        """

    @abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        max_output: int,
        timeout: float,
        on_chunk: OnChunk | None = None,
        should_stop: Callable[[], bool] = _never,
    ) -> ExecResult:
        """Run a command in the call's working directory (stdout and stderr together)."""


def git_ls_files_entries(result: ExecResult, max_depth: int) -> list[Entry] | None:
    """The files `git ls-files -z` listed (None when git did not answer: not a work tree)."""
    if not result.ok:
        return None
    names = result.output.decode("utf-8", "surrogateescape").split("\0")
    if result.truncated:
        names = names[:-1]  # the last name may be cut in the middle
    return [
        Entry(name)
        for name in names
        if name and utf8_name(name) and (max_depth == 0 or entry_depth(name) <= max_depth)
    ]


def utf8_name(name: str) -> bool:
    """Whether a file name decoded from the system is valid UTF-8 (it can go into JSON).

    Names that are not are left out of listings: the answer could not carry them.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
