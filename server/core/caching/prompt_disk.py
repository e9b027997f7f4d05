"""Processed prompts kept on disk (`--cachedir`), so a conversation is warm again after a
restart, a model switch or a crash.

One file per saved state, `<hash>.hkv`, the hash taken over the fingerprint and the tokens: the
same state written twice (by this process or another) is one file. A file is, in order:

    magic          8 bytes   b"HEARTHKV"
    version        uint32    FORMAT_VERSION
    fingerprint    uint32 length, then that many bytes of UTF-8
    tokens         uint32 count, then that many int32
    payload size   uint64
    checksum       32 bytes  SHA-256 of everything above it and of the payload
    payload        the engine's state (opaque bytes here)

All integers are little-endian. The safety rules:

- Fingerprints: the engine's fingerprint names the model file, the llama.cpp build and the KV
  layout; a state is used only under exactly the fingerprint it was written with. Files of
  another fingerprint (another model's, sharing the folder) are left alone, and so are files
  of another format version (a newer Hearth's): this module cannot judge them.
- Atomic writes: a state is written to a unique temporary file in the same folder, flushed to
  disk, then renamed over its name, so no reader (in any process) sees half a file, and two
  processes writing the same state at once each rename a whole one. A crashed writer's
  temporary file is removed by a later `index()` once it is an hour old.
- Checksums: `index()` reads headers only and drops files whose header or length is wrong;
  `read()` checks the SHA-256 before returning a payload. A bad file is removed with one
  warning naming it and is never returned: restoring a damaged state would corrupt a slot.
- Bounds: after each write the oldest used files of this fingerprint (file mtime, which a read
  renews) are deleted until the fingerprint's files fit in `max_bytes`.

Disk errors never raise: a failed write returns False and logs a warning, a failed read None.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from server.core.caching.prompt_cache import common_prefix

logger = logging.getLogger(__name__)

MAGIC = b"HEARTHKV"
FORMAT_VERSION = 1
SUFFIX = ".hkv"
TEMP_PREFIX = ".hkv-"
TEMP_SUFFIX = ".tmp"
# Long enough for no writer to still be at work on it, even a huge state on a slow disk.
STALE_TEMP_SECONDS = 3600.0
# Far above any real fingerprint: a larger length is damage, not something to read.
MAX_FINGERPRINT_BYTES = 4096

_START = struct.Struct("<8sII")  # magic, version, fingerprint length
_COUNT = struct.Struct("<I")
_PAYLOAD_SIZE = struct.Struct("<Q")
_DIGEST_BYTES = 32


class DamagedFile(Exception):
    """A file that cannot be one of ours, whole: its reason is the warning's."""


class ForeignFile(Exception):
    """A whole file this process must not judge: another fingerprint or format version."""


@dataclass(frozen=True)
class DiskEntry:
    """One saved state on disk, as its header tells it."""

    tokens: tuple[int, ...]
    path: Path
    size: int  # bytes of the whole file


@dataclass(frozen=True)
class DiskStats:
    files: int
    bytes: int
    max_bytes: int


@dataclass(frozen=True)
class _Header:
    fingerprint: bytes
    tokens: bytes  # int32 little-endian, parsed only for this fingerprint's files
    payload_size: int
    digest: bytes
    length: int  # bytes before the payload


def _header_bytes(fingerprint: bytes, tokens: Sequence[int], payload_size: int) -> bytes:
    return b"".join(
        (
            _START.pack(MAGIC, FORMAT_VERSION, len(fingerprint)),
            fingerprint,
            _COUNT.pack(len(tokens)),
            struct.pack(f"<{len(tokens)}i", *tokens),
            _PAYLOAD_SIZE.pack(payload_size),
        )
    )


def _read_exactly(handle: BinaryIO, count: int) -> bytes:
    data = handle.read(count)
    if len(data) != count:
        raise DamagedFile("truncated")
    return data


def _read_header(handle: BinaryIO, file_size: int) -> _Header:
    """The header of an open file, checked against the file's size (reading no payload)."""
    magic, version, fingerprint_size = _START.unpack(_read_exactly(handle, _START.size))
    if magic != MAGIC:
        raise DamagedFile("not a Hearth prompt state (bad magic)")
    if version != FORMAT_VERSION:
        raise ForeignFile(f"format version {version}")
    if fingerprint_size > MAX_FINGERPRINT_BYTES:
        raise DamagedFile("bad fingerprint length")
    fingerprint = _read_exactly(handle, fingerprint_size)
    (count,) = _COUNT.unpack(_read_exactly(handle, _COUNT.size))
    if handle.tell() + 4 * count > file_size:
        raise DamagedFile("bad token count")
    tokens = _read_exactly(handle, 4 * count)
    (payload_size,) = _PAYLOAD_SIZE.unpack(_read_exactly(handle, _PAYLOAD_SIZE.size))
    digest = _read_exactly(handle, _DIGEST_BYTES)
    length = handle.tell()
    if length + payload_size != file_size:
        raise DamagedFile("truncated" if length + payload_size > file_size else "bad length")
    return _Header(fingerprint, tokens, payload_size, digest, length - _DIGEST_BYTES)


def _remove(path: Path) -> None:
    # Another process may have removed it first (evicted, or the same damage found).
    with contextlib.suppress(OSError):
        path.unlink()


class DiskStates:
    """The saved states of one fingerprint in `folder`, under `max_bytes`. Thread-safe: the
    worker writes and reads, the event loop asks for stats. Other processes may share the
    folder; `rescan()` sees what they wrote."""

    def __init__(self, folder: Path, fingerprint: str, max_bytes: int) -> None:
        self.folder = folder
        self.fingerprint = fingerprint
        self.max_bytes = max_bytes
        self._fingerprint_bytes = fingerprint.encode("utf-8")
        self._lock = threading.Lock()
        self._entries: dict[Path, DiskEntry] | None = None  # None: not scanned yet
        # When this process last used each file: breaks ties between equal mtimes (a coarse
        # clock gives files written in the same tick the same one).
        self._used: dict[Path, int] = {}
        self._uses = 0
        self._failing = False  # a write failed: later failures are not repeated on the console

    # --- finding -------------------------------------------------------------------------

    def index(self) -> list[DiskEntry]:
        """This fingerprint's states, scanned from the folder on first use."""
        with self._lock:
            if self._entries is not None:
                return list(self._entries.values())
        entries = self._scan()  # outside the lock: the event loop's stats() must not wait
        with self._lock:
            if self._entries is None:
                self._entries = entries
            return list(self._entries.values())

    def rescan(self) -> list[DiskEntry]:
        """Read the folder again: another process may have written or removed states."""
        entries = self._scan()
        with self._lock:
            self._entries = entries
            return list(entries.values())

    def best(self, prompt: Sequence[int]) -> tuple[DiskEntry | None, int]:
        """The state sharing the longest token prefix with `prompt`, and that length; of
        equal ones the smallest file (the quickest to read back)."""
        found, length = None, 0
        for entry in self.index():
            shared = common_prefix(entry.tokens, prompt)
            if shared > length or (shared == length > 0 and found and entry.size < found.size):
                found, length = entry, shared
        return found, length

    def stats(self) -> DiskStats:
        entries = self.index()
        return DiskStats(len(entries), sum(entry.size for entry in entries), self.max_bytes)

    def _scan(self) -> dict[Path, DiskEntry]:
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return {}  # no folder yet: nothing written
        entries: dict[Path, DiskEntry] = {}
        for name in names:
            path = self.folder / name
            if name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX):
                self._remove_if_stale(path)
            elif name.endswith(SUFFIX) and (entry := self._entry_of(path)) is not None:
                entries[path] = entry
        return entries

    def _entry_of(self, path: Path) -> DiskEntry | None:
        """The entry a file holds, if it is this fingerprint's; a damaged file is removed."""
        try:
            with path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                header = _read_header(handle, size)
        except FileNotFoundError:
            return None  # removed by another process since the listing
        except ForeignFile:
            return None
        except (DamagedFile, OSError, struct.error) as error:
            self._drop_damaged(path, str(error))
            return None
        if header.fingerprint != self._fingerprint_bytes:
            return None  # another model's: not ours to judge or remove
        tokens = struct.unpack(f"<{len(header.tokens) // 4}i", header.tokens)
        return DiskEntry(tokens, path, size)

    @staticmethod
    def _remove_if_stale(path: Path) -> None:
        with contextlib.suppress(OSError):
            if time.time() - path.stat().st_mtime > STALE_TEMP_SECONDS:
                path.unlink()
                logger.info("Prompt cache: removed %s, left by an interrupted write.", path)

    # --- reading -------------------------------------------------------------------------

    def read(self, entry: DiskEntry) -> bytes | None:
        """The payload of `entry`, checked; None when it is gone or damaged (then removed)."""
        try:
            payload = self._read_checked(entry)
        except FileNotFoundError:
            self._forget(entry.path)  # evicted by another process
            return None
        except (DamagedFile, OSError, struct.error) as error:
            self._drop_damaged(entry.path, str(error))
            return None
        with contextlib.suppress(OSError):
            os.utime(entry.path)  # used now: the last to be evicted
        self._mark_used(entry.path)
        return payload

    def _read_checked(self, entry: DiskEntry) -> bytes:
        with entry.path.open("rb") as handle:
            header = _read_header(handle, os.fstat(handle.fileno()).st_size)
            if header.fingerprint != self._fingerprint_bytes or header.tokens != struct.pack(
                f"<{len(entry.tokens)}i", *entry.tokens
            ):
                # The name is the hash of both: a different header means a damaged file.
                raise DamagedFile("header differs from the index")
            handle.seek(0)
            digest = hashlib.sha256(_read_exactly(handle, header.length))
            handle.seek(_DIGEST_BYTES, os.SEEK_CUR)
            payload = _read_exactly(handle, header.payload_size)
        digest.update(payload)
        if digest.digest() != header.digest:
            raise DamagedFile("checksum mismatch")
        return payload

    def _drop_damaged(self, path: Path, reason: str) -> None:
        logger.warning("Prompt cache: removed damaged file %s (%s).", path, reason)
        _remove(path)
        self._forget(path)

    # --- writing -------------------------------------------------------------------------

    def path_for(self, tokens: Sequence[int]) -> Path:
        digest = hashlib.sha256(self._fingerprint_bytes + b"\0")
        digest.update(struct.pack(f"<{len(tokens)}i", *tokens))
        return self.folder / f"{digest.hexdigest()[:40]}{SUFFIX}"

    def write(self, tokens: Sequence[int], data: bytes | memoryview) -> bool:
        """Save a state for `tokens`; then evict the least recently used beyond `max_bytes`.
        False when it is not on disk: too big for the bound, or the disk failed (one warning)."""
        view = memoryview(data)
        header = _header_bytes(self._fingerprint_bytes, tokens, view.nbytes)
        size = len(header) + _DIGEST_BYTES + view.nbytes
        if size > self.max_bytes:
            return False
        path = self.path_for(tokens)
        self.index()  # scanned before this write, so the write is not counted twice
        try:
            try:
                os.utime(path)  # the same state again (maybe another process's): used now
            except FileNotFoundError:
                self._write_atomically(path, header, view)
        except OSError as error:
            self._write_failed(error)
            return False
        self._failing = False
        with self._lock:
            if self._entries is not None:
                self._entries[path] = DiskEntry(tuple(tokens), path, size)
        self._mark_used(path)
        self._evict_beyond_bound(keep=path)
        return True

    def _write_atomically(self, path: Path, header: bytes, payload: memoryview) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(header)
        digest.update(payload)
        fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=self.folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(header)
                handle.write(digest.digest())
                handle.write(payload)
                # On disk before the rename, or a power cut could leave a short file there.
                handle.flush()
                os.fsync(handle.fileno())
            # If another process renamed the same state meanwhile, this replaces a whole file
            # with another whole one for the same tokens: readers see one or the other.
            os.replace(temp, path)
        except BaseException:
            _remove(Path(temp))
            raise

    def _write_failed(self, error: OSError) -> None:
        # A full disk fails every save: the console says so once, until a write succeeds.
        if not self._failing:
            logger.warning("Prompt cache: could not save to %s: %s", self.folder, error)
        self._failing = True

    # --- evicting ------------------------------------------------------------------------

    def _evict_beyond_bound(self, keep: Path) -> None:
        """Delete this fingerprint's least recently used files (oldest mtime first) until the
        rest fit in `max_bytes`; `keep`, just written, stays."""
        with self._lock:
            entries = list((self._entries or {}).values())
        total = sum(entry.size for entry in entries)
        if total <= self.max_bytes:
            return
        aged = []
        for entry in entries:
            try:
                mtime = entry.path.stat().st_mtime_ns  # another process may have read it
            except OSError:
                self._forget(entry.path)  # evicted by another process
                total -= entry.size
                continue
            aged.append((mtime, self._used.get(entry.path, 0), entry))
        for _, _, entry in sorted(aged, key=lambda item: item[:2]):
            if total <= self.max_bytes:
                break
            if entry.path != keep:
                _remove(entry.path)
                self._forget(entry.path)
                total -= entry.size

    def _mark_used(self, path: Path) -> None:
        with self._lock:
            self._uses += 1
            self._used[path] = self._uses

    def _forget(self, path: Path) -> None:
        with self._lock:
            if self._entries is not None:
                self._entries.pop(path, None)
            self._used.pop(path, None)
