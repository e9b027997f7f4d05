"""The keys that open the text APIs, each with a name shown instead of the key.

KoboldCpp's `--password` (named `password`), llama-server's `--api-key k1,k2` (`api-key-1`,
`api-key-2`, …) and `--api-key-file` (one key per line, `#` comments; Hearth also reads
`name:key`, and an unnamed line's key is `key-file-line-N`). The file is re-read without a
restart (`KeyRing.reload`: on SIGHUP, and by KoboldCpp's admin reload); a file that cannot be
read then keeps the keys already in use.

Keys are never logged, shown or kept: the ring holds each key's SHA-256 digest, and a request's
key is compared with every digest in constant time (digests all have one length, so neither a
key's length nor which key matched shows in the timing). The name of the key a request used is
recorded for it (`key_name()`), for the console, the launcher's live rows and /metrics.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import signal
from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from server.settings.config import HearthSettings

logger = logging.getLogger("hearth")

PASSWORD_NAME = "password"
# Larger than any list of keys: a wrong path (a model, a log) is refused, not read.
MAX_KEY_FILE_BYTES = 1024 * 1024

# The reload's console line names this many keys at most (a file may hold thousands).
_NAMES_SHOWN = 20

_key_name: ContextVar[str] = ContextVar("hearth_api_key_name", default="")


def key_name() -> str:
    """The name of the API key the request being handled presented ("" when the server needs
    no key, and outside a request). Set by the key check (server/dialects/edge/deps.py)."""
    return _key_name.get()


def record_key_name(name: str) -> None:
    """Record `name` as the key of the request being handled (its task and what it starts)."""
    _key_name.set(name)


class KeyFileError(Exception):
    """The key file cannot be used; the message names the file and line, never a key."""


@dataclass(frozen=True, slots=True)
class ApiKey:
    name: str
    digest: bytes  # SHA-256 of the key; the key itself is not kept


def digest_of(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def parse_key_file(text: str, source: str) -> list[tuple[str, str]]:
    """(name, key) for each key line of a key file's text: `key` or `name:key` (split at the
    first colon, so a key holding a colon needs a name); blank lines and `#` comments skipped.
    KeyFileError for a line that is not a usable key, and for a file without any key (which
    would otherwise open the server to everyone)."""
    found: list[tuple[str, str]] = []
    # A byte-order mark (Windows editors write one) is not part of the first key.
    for number, line in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, key = line.partition(":")
        if not colon:
            name, key = "", line
        name, key = name.strip(), key.strip()
        if not key:
            raise KeyFileError(f"{source}, line {number}: a name without a key")
        # What an HTTP header carries intact: visible ASCII, no spaces.
        if not all(33 <= ord(char) <= 126 for char in key):
            raise KeyFileError(
                f"{source}, line {number}: a key must be visible ASCII characters, no spaces"
            )
        if not name.isprintable():
            raise KeyFileError(f"{source}, line {number}: the name has control characters")
        found.append((name or f"key-file-line-{number}", key))
    if not found:
        raise KeyFileError(f"{source}: no keys in it (one per line, or name:key)")
    return found


def read_key_file(path: Path) -> list[tuple[str, str]]:
    """The file's (name, key) pairs; KeyFileError when it cannot be read or parsed."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise KeyFileError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(f"{path}: larger than {MAX_KEY_FILE_BYTES} bytes, not a key file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise KeyFileError(f"{path}: not UTF-8 text") from None
    return parse_key_file(text, str(path))


def _ring_of(pairs: list[tuple[str, str]]) -> tuple[ApiKey, ...]:
    """One entry per distinct key; a key given twice keeps its first name."""
    seen: set[bytes] = set()
    keys: list[ApiKey] = []
    for name, key in pairs:
        digest = digest_of(key)
        if digest not in seen:
            seen.add(digest)
            keys.append(ApiKey(name, digest))
    return tuple(keys)


class KeyRing:
    """Every key that opens the text APIs, by name; empty: the server needs no key.

    `--password` and `--api-key` are fixed for the server's life; the key file's keys are
    replaced whole on `reload` (a single attribute swap, so a request sees the old set or
    the new one, never half of each). Counts of requests let in per name and refused are
    kept for /metrics, across reloads."""

    def __init__(
        self,
        fixed: list[tuple[str, str]],
        file: Path | None = None,
        in_file: list[tuple[str, str]] | None = None,
    ) -> None:
        self._fixed = fixed
        self._file = file
        self._keys = _ring_of(fixed + (in_file or []))
        self.accepted: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()  # by reason: "missing" or "wrong"

    @classmethod
    def from_settings(cls, settings: HearthSettings) -> KeyRing:
        """The ring of --password, --api-key and --api-key-file; KeyFileError when the file
        cannot be read or holds no usable key (the server does not start)."""
        fixed: list[tuple[str, str]] = []
        if settings.password:
            fixed.append((PASSWORD_NAME, settings.password))
        listed = [part.strip() for part in (settings.api_key or "").split(",") if part.strip()]
        fixed += [(f"api-key-{index}", key) for index, key in enumerate(listed, start=1)]
        file = Path(settings.api_key_file).expanduser() if settings.api_key_file else None
        in_file = read_key_file(file) if file is not None else []
        return cls(fixed, file, in_file)

    @property
    def reloads(self) -> bool:
        """True when there is a key file to re-read."""
        return self._file is not None

    @property
    def required(self) -> bool:
        """True when requests must present one of the keys."""
        return bool(self._keys)

    def names(self) -> list[str]:
        """Each key's name, once, in order (several keys may share one)."""
        return list(dict.fromkeys(key.name for key in self._keys))

    def match(self, offered: str) -> str | None:
        """The name of the key `offered` is, or None. Every key is compared, whatever matched
        first, and in constant time: the timing says nothing about the keys."""
        digest = digest_of(offered)
        found: str | None = None
        for key in self._keys:
            matches = hmac.compare_digest(digest, key.digest)
            found = key.name if matches and found is None else found
        return found

    def reload(self) -> bool:
        """Re-read the key file (nothing to do without one). A file that cannot be read or
        parsed keeps the keys in use, and says so in one line; True when it was read."""
        if self._file is None:
            return False
        try:
            in_file = read_key_file(self._file)
        except KeyFileError as exc:
            logger.warning("API keys not reloaded, the keys in use stay: %s", exc)
            return False
        self._keys = _ring_of(self._fixed + in_file)
        names = self.names()
        shown = ", ".join(names[:_NAMES_SHOWN])
        more = f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else ""
        logger.info("API keys reloaded from %s: %s%s", self._file, shown, more)
        return True


def reload_on_hangup(ring: KeyRing) -> None:
    """With a key file, re-read it whenever the process gets SIGHUP (as nginx and other
    daemons do) instead of ending; without one, SIGHUP keeps its default (a closed terminal
    ends the server). Windows has no SIGHUP: nothing to install there.

    The handler only schedules the reload on the running event loop, where it runs as any
    callback: read in the signal handler itself, a reload could interrupt the console's own
    write and log into it. Before the server listens (the model loading) it is ignored: the
    file was read just before."""
    hangup = getattr(signal, "SIGHUP", None)
    if hangup is None or not ring.reloads:
        return

    def on_hangup(_signal: int, _frame: FrameType | None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not serving (yet, or any more): nothing reads the keys
            return
        loop.call_soon_threadsafe(ring.reload)

    signal.signal(hangup, on_hangup)
