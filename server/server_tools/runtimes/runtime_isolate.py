"""The runtimes that are not this machine: a running container, or a host reached over ssh.

Every operation is a POSIX command run there (`sh`, `cat`, `wc`, `mkdir`, `dirname`, `find`,
`timeout` must exist, as in a busybox image): a file is read with `cat`, written by `cat > file`
from stdin (the content never travels on a command line), a folder is listed by `git ls-files`
or `find`. Paths are POSIX paths of the far side; relative ones are taken from the call's cwd.

`<engine> exec <id> ...` runs the command in the container; ssh gets the command as one quoted
word, since the remote shell parses it again. ssh is remoting, not isolation: the tools can do
whatever the target account can. It runs in batch mode (key authentication only, host key
already trusted): there is no console to answer a prompt.
"""

from __future__ import annotations

import math
import posixpath
import shlex
from abc import abstractmethod
from collections.abc import Callable, Sequence

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
    entry_depth,
    git_ls_files_entries,
    too_large,
    utf8_name,
)

AUX_TIMEOUT_S = 15.0  # a stat, a read, a write: anything but the user's own command
# the far side's `timeout` ends the command; the near side's deadline comes this much later
TIMEOUT_GRACE_S = 5.0

_STAT_SCRIPT = (
    'if [ -d "$1" ]; then echo dir; elif [ -f "$1" ]; then echo file; wc -c < "$1"; '
    'elif [ -e "$1" ]; then echo other; else echo missing; fi'
)
_WRITE_SCRIPT = 'mkdir -p "$(dirname "$1")" && cat > "$1"'
_GIT_SCRIPT = 'cd "$1" && git ls-files -z --cached --others --exclude-standard'
# 127 is what a shell answers for a command it could not run
_IN_CWD_SCRIPT = 'cd "$1" || exit 127; shift; exec "$@"'
_JUNK_TEST = " -o ".join(f"-name {name}" for name in sorted(JUNK_DIR_NAMES))


def _never() -> bool:
    return False


class IsolateRuntime(Runtime):
    """A runtime that runs each operation as a command on the far side (`wrap` says how)."""

    def __init__(self, cwd: str | None = None) -> None:
        self.cwd = cwd

    @abstractmethod
    def wrap(self, inner: Sequence[str], needs_stdin: bool) -> list[str]:
        """The command line, on this machine, that runs `inner` on the far side."""

    def resolve(self, path: str) -> str:
        if posixpath.isabs(path):
            return posixpath.normpath(path)
        if not self.cwd:
            return path  # the far side's own working directory applies
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def stat(self, path: str) -> PathInfo:
        result = self._exec(["sh", "-c", _STAT_SCRIPT, "_", path], 4096)
        words = result.text().split()
        if not result.ok or not words or words[0] not in ("missing", "file", "dir", "other"):
            raise OSError(f"cannot stat {path}: {result.error_text() or 'no answer'}")
        if words[0] == "file":
            return PathInfo("file", int(words[1]) if len(words) > 1 and words[1].isdigit() else 0)
        return PathInfo(words[0])  # type: ignore[arg-type]  # checked against the four above

    def read_bytes(self, path: str, limit: int) -> bytes:
        # one byte more than the limit tells a file that is too large from one that fits
        result = self._exec(["cat", "--", path], limit + 1, combine_stderr=False)
        if not result.ok:
            raise OSError(result.error_text() or f"cannot read {path}")
        if len(result.output) > limit:
            raise too_large(limit)
        return result.output

    def write_bytes(self, path: str, data: bytes) -> None:
        argv = self.wrap(["sh", "-c", _WRITE_SCRIPT, "_", path], needs_stdin=True)
        result = run_process(argv, max_output=4096, timeout=AUX_TIMEOUT_S, stdin_data=data)
        if not result.ok:
            raise OSError(result.error_text() or f"cannot write {path}")

    def list_entries(self, base: str, max_depth: int, kind: ListKind, budget: Budget) -> Listing:
        if kind is ListKind.FILES:
            git = self._exec(
                ["sh", "-c", _GIT_SCRIPT, "_", base],
                GIT_LS_FILES_MAX_OUTPUT,
                timeout=budget.left(),
                combine_stderr=False,
            )
            entries = git_ls_files_entries(git, max_depth)
            if entries is not None:
                return Listing(entries, truncated=git.truncated)
        listing = Listing()
        if kind.wants_dirs:
            self._find(listing, base, max_depth, True, budget)
        if kind.wants_files:
            self._find(listing, base, max_depth, False, budget)
        # the top of the tree first, as the walk on this machine lists it
        listing.entries.sort(key=lambda entry: (entry_depth(entry.rel), entry.rel))
        return listing

    def run(
        self,
        argv: Sequence[str],
        *,
        max_output: int,
        timeout: float,
        on_chunk: OnChunk | None = None,
        should_stop: Callable[[], bool] = _never,
    ) -> ExecResult:
        # ending the client here does not end what runs there: the far side's own `timeout` does
        inner = ["timeout", f"{max(1, math.ceil(timeout))}s", *argv]
        if self.cwd:
            inner = ["sh", "-c", _IN_CWD_SCRIPT, "_", self.cwd, *inner]
        return run_process(
            self.wrap(inner, needs_stdin=True),
            max_output=max_output,
            timeout=timeout + TIMEOUT_GRACE_S,
            stdin_data=b"",
            on_chunk=on_chunk,
            should_stop=should_stop,
        )

    def _exec(
        self,
        inner: Sequence[str],
        max_output: int,
        *,
        timeout: float = AUX_TIMEOUT_S,
        combine_stderr: bool = True,
    ) -> ExecResult:
        return run_process(
            self.wrap(inner, needs_stdin=False),
            max_output=max_output,
            timeout=timeout,
            combine_stderr=combine_stderr,
        )

    def _find(self, listing: Listing, base: str, depth: int, dirs: bool, budget: Budget) -> None:
        """One `find` pass: junk folders are listed (as folders) but never gone into."""
        limit = f" -maxdepth {depth}" if depth > 0 else ""
        junk = f"-type d \\( {_JUNK_TEST} \\) -prune"
        tail = " -print -o -type d -print" if dirs else " -o -type f -print"
        script = f'cd "$1" && find . -mindepth 1{limit} {junk}{tail}'
        result = self._exec(
            ["sh", "-c", script, "_", base], GIT_LS_FILES_MAX_OUTPUT, timeout=budget.left()
        )
        listing.truncated = listing.truncated or result.timed_out or result.truncated
        for line in result.output.decode("utf-8", "surrogateescape").split("\n"):
            rel = line[2:] if line.startswith("./") else line
            if rel and utf8_name(rel):
                listing.entries.append(Entry(rel, is_dir=dirs))


class ContainerRuntime(IsolateRuntime):
    """A container that is already running, driven by `docker exec` or `podman exec`."""

    def __init__(self, engine: str, container_id: str, cwd: str | None = None) -> None:
        super().__init__(cwd)
        self.engine = engine
        self.container_id = container_id

    def wrap(self, inner: Sequence[str], needs_stdin: bool) -> list[str]:
        keep_stdin = ["-i"] if needs_stdin else []
        return [self.engine, "exec", *keep_stdin, self.container_id, *inner]


class SshRuntime(IsolateRuntime):
    """A host reached over ssh, as `[user@]host`."""

    OPTIONS = (
        "-o", "BatchMode=yes",
        "-o", "PasswordAuthentication=no",
        "-o", "KbdInteractiveAuthentication=no",
        "-o", "StrictHostKeyChecking=yes",
    )  # fmt: skip

    def __init__(self, target: str, cwd: str | None = None) -> None:
        super().__init__(cwd)
        self.target = target

    def wrap(self, inner: Sequence[str], needs_stdin: bool) -> list[str]:
        no_stdin = [] if needs_stdin else ["-n"]
        # "--": whatever the target is, ssh does not read it as an option
        return ["ssh", *self.OPTIONS, *no_stdin, "--", self.target, shlex.join(inner)]
