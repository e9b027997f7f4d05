"""The runtime that is this machine: the tools act on the server's own files and processes.

Relative paths resolve against the call's cwd (the `x-tool-cwd` header), else the server's
working directory; a leading `~` is the server user's home. A folder is listed by `git
ls-files` when it lies in a git work tree (so .gitignore applies), else by a walk that reports
the junk folders (node_modules, .git, build, ...) but never goes into them nor follows a link.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from server.server_tools.runtimes.process_run import ExecResult, OnChunk, run_process
from server.server_tools.runtimes.runtime_io import (
    GIT_LS_FILES_MAX_OUTPUT,
    JUNK_DIR_NAMES,
    Budget,
    Entry,
    Listing,
    ListKind,
    PathInfo,
    Runtime,
    git_ls_files_entries,
    too_large,
    utf8_name,
)


def _never() -> bool:
    return False


class HostRuntime(Runtime):
    is_host = True

    def __init__(self, cwd: str | None = None) -> None:
        self.cwd = cwd

    def resolve(self, path: str) -> str:
        base = self.cwd or os.getcwd()
        # "." and ".." are folded away so that they never reach git or the answer
        return os.path.normpath(os.path.abspath(os.path.join(base, _expand_home(path))))

    def stat(self, path: str) -> PathInfo:
        try:
            found = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return PathInfo("missing")
        if stat.S_ISDIR(found.st_mode):
            return PathInfo("dir")
        if stat.S_ISREG(found.st_mode):
            return PathInfo("file", found.st_size)
        return PathInfo("other")

    def read_bytes(self, path: str, limit: int) -> bytes:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise too_large(limit)
        return data

    def write_bytes(self, path: str, data: bytes) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def list_entries(self, base: str, max_depth: int, kind: ListKind, budget: Budget) -> Listing:
        if kind is ListKind.FILES:  # git cannot list folders
            listed = self._git_files(base, max_depth, budget)
            if listed is not None:
                return listed
        return walk_folder(base, max_depth, kind, budget)

    def run(
        self,
        argv: Sequence[str],
        *,
        max_output: int,
        timeout: float,
        on_chunk: OnChunk | None = None,
        should_stop: Callable[[], bool] = _never,
    ) -> ExecResult:
        return run_process(
            argv,
            cwd=self.cwd,
            max_output=max_output,
            timeout=timeout,
            on_chunk=on_chunk,
            should_stop=should_stop,
        )

    def _git_files(self, base: str, max_depth: int, budget: Budget) -> Listing | None:
        argv = ["git", "-C", base, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
        try:
            result = run_process(
                argv,
                max_output=GIT_LS_FILES_MAX_OUTPUT,
                timeout=budget.left(),
                should_stop=budget.should_stop,
                combine_stderr=False,
            )
        except OSError:  # no git on this machine
            return None
        entries = git_ls_files_entries(result, max_depth)
        if entries is None:
            return None
        # a tracked file deleted from the work tree is still in the index
        present = [entry for entry in entries if os.path.isfile(os.path.join(base, entry.rel))]
        return Listing(present, truncated=result.truncated)


def walk_folder(base: str, max_depth: int, kind: ListKind, budget: Budget) -> Listing:
    """List `base` breadth first (the top of the tree first, names sorted within a folder)."""
    listing = Listing()
    pending: deque[tuple[str, str, int]] = deque([(base, "", 0)])
    while pending:
        if budget.spent():
            listing.truncated = True
            break
        folder, rel_dir, depth = pending.popleft()
        try:
            with os.scandir(folder) as scan:
                children = sorted(scan, key=lambda child: child.name)
        except OSError:  # unreadable: the caller is told the listing is incomplete
            listing.truncated = True
            continue
        descend = max_depth == 0 or depth + 1 < max_depth
        for child in children:
            if not utf8_name(child.name):
                continue
            rel = rel_dir + child.name
            if _is_dir(child):
                if kind.wants_dirs:
                    listing.entries.append(Entry(rel, is_dir=True))
                # a link may point back up the tree: listed, never walked
                if descend and child.name not in JUNK_DIR_NAMES and not child.is_symlink():
                    pending.append((child.path, rel + "/", depth + 1))
            elif kind.wants_files and _is_file(child):
                listing.entries.append(Entry(rel))
    return listing


def _is_dir(child: os.DirEntry[str]) -> bool:
    try:
        return child.is_dir()
    except OSError:
        return False


def _is_file(child: os.DirEntry[str]) -> bool:
    try:
        return child.is_file()
    except OSError:
        return False


def _expand_home(path: str) -> str:
    """`~` and `~/...` are the home folder; `~user` is left as it is, like llama-server."""
    if path == "~" or path.startswith(("~/", "~\\")):
        home = os.environ.get("HOME") or os.path.expanduser("~")
        return home + path[1:]
    return path
