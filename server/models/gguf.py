"""What a GGUF file says about itself, read cheaply: its header, never its tensor data.

`gguf_summary(path)` reads the header (server/models/gguf_header.py parses and checks it, so a
truncated download or a file that is not a GGUF at all is refused with a one-line
`GGUFFormatError` before llama.cpp's loader sees it) and answers what clients ask about: the
architecture, parameter count and size label, quantization, context length, chat template.
Results are cached per process by path, size and modification time.

`file_sha256(path)` is the file's SHA-256, hashed once and remembered in a small JSON sidecar
(beside the file, or under the user cache folder when that folder is not writable) keyed by
size and modification time, so later starts never re-hash an unchanged file. It blocks while
hashing: call it through `asyncio.to_thread` from the event loop.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from gguf import LlamaFileType

from server.base.atomic_file import write_text_atomically
from server.models.gguf_header import GGUFFormatError as GGUFFormatError
from server.models.gguf_header import MetadataValue as MetadataValue
from server.models.gguf_header import TensorInfo as TensorInfo
from server.models.gguf_header import read_header

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class GGUFSummary:
    """One GGUF file's identity and the metadata clients ask about."""

    path: Path
    file_size: int
    mtime_ns: int
    version: int
    metadata: Mapping[str, MetadataValue]  # scalars and short arrays; long arrays are None
    tensors: tuple[TensorInfo, ...]

    @property
    def architecture(self) -> str:
        return _text(self.metadata.get("general.architecture"))

    @property
    def name(self) -> str:
        return _text(self.metadata.get("general.name"))

    @property
    def parameter_count(self) -> int:
        """Sum of the tensors' element counts (what Ollama reports)."""
        return sum(tensor.n_elements for tensor in self.tensors)

    @property
    def parameter_size(self) -> str:
        """Ollama's label: "268.10M", "7.2B"; `general.size_label` when there are no tensors."""
        if self.parameter_count:
            return parameter_size_label(self.parameter_count)
        return _text(self.metadata.get("general.size_label"))

    @property
    def file_type(self) -> int | None:
        value = self.metadata.get("general.file_type")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def quantization(self) -> str:
        """ "Q4_K_M", "F16", …: `general.file_type`, else the type holding most weights."""
        named = quantization_name(self.file_type)
        if named:
            return named
        weights: Counter[str] = Counter()
        for tensor in self.tensors:
            weights[tensor.type_name] += tensor.n_elements
        return weights.most_common(1)[0][0] if weights else ""

    @property
    def context_length(self) -> int | None:
        """The context the model was trained for (`<architecture>.context_length`)."""
        return self.architecture_number("context_length")

    def architecture_number(self, key: str) -> int | None:
        """`<architecture>.<key>` as an int; per-layer values (some architectures) give their
        largest. None when absent or not a number."""
        value = self.metadata.get(f"{self.architecture}.{key}")
        if isinstance(value, (tuple, list)):
            value = max((v for v in value if isinstance(v, int)), default=None)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def vocabulary_size(self) -> int:
        """Tokens in the vocabulary, from the token embedding's shape (0 if it has none)."""
        embedding = next((t for t in self.tensors if t.name == "token_embd.weight"), None)
        if embedding is not None and len(embedding.shape) == 2:
            return embedding.shape[1]  # GGUF shapes list the innermost dimension first
        return 0

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) else None

    @property
    def modified_at(self) -> datetime:
        return mtime_datetime(self.mtime_ns)


def parameter_size_label(count: int) -> str:
    """Ollama's format.HumanNumber: 268098176 → "268.10M", 7241732096 → "7.2B"."""
    for scale, suffix, decimals in ((10**9, "B", 1), (10**6, "M", 2)):
        if count >= scale:
            number = count / scale
            return f"{number:.{0 if number.is_integer() else decimals}f}{suffix}"
    if count >= 1000:
        return f"{count / 1000:.0f}K"
    return str(count)


def quantization_name(file_type: int | None) -> str:
    """`general.file_type` as llama.cpp names it: 15 → "Q4_K_M", 1 → "F16"; "" if unknown."""
    if file_type is None:
        return ""
    try:
        member = LlamaFileType(file_type)
    except ValueError:
        return ""
    if member is LlamaFileType.GUESSED:
        return ""
    return member.name.removeprefix("MOSTLY_").removeprefix("ALL_")


def mtime_datetime(mtime_ns: int) -> datetime:
    """A modification time as an aware UTC datetime, exact to the microsecond."""
    return _EPOCH + timedelta(microseconds=mtime_ns // 1000)


def rfc3339(moment: datetime) -> str:
    """`2025-05-01T12:34:56.123456Z`: RFC 3339 in UTC, as Go clients and pydantic parse it."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


# -- reading the header ---------------------------------------------------------------------


def gguf_summary(path: Path) -> GGUFSummary:
    """The file's header, checked; cached while the file keeps its size and mtime.

    Raises GGUFFormatError (not a GGUF, unsupported version, truncated, corrupt header) or
    OSError (cannot be read).
    """
    stat = path.stat()
    return _cached_summary(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _cached_summary(path: str, size: int, mtime_ns: int) -> GGUFSummary:
    # size and mtime_ns are the cache key: a replaced or rewritten file is read again.
    with open(path, "rb") as handle:
        header = read_header(handle)
    return GGUFSummary(
        Path(path), header.file_size, mtime_ns, header.version, header.metadata, header.tensors
    )


def _text(value: MetadataValue) -> str:
    return value if isinstance(value, str) else ""


# -- the file's digest ---------------------------------------------------------------------

_digest_lock = threading.Lock()  # one hash at a time; a second caller waits for the first


def file_sha256(path: Path) -> str:
    """The file's SHA-256 (hex), hashed once per file version and remembered in a sidecar."""
    stat = path.stat()
    key = (stat.st_size, stat.st_mtime_ns)
    with _digest_lock:
        return _cached_sha256(str(path), *key)


@functools.lru_cache(maxsize=32)
def _cached_sha256(path_text: str, size: int, mtime_ns: int) -> str:
    path = Path(path_text)
    record = {"size": size, "mtime_ns": mtime_ns}
    places = _sidecar_places(path)
    for place in places:
        with contextlib.suppress(OSError, ValueError):  # missing, unreadable or not JSON
            stored = json.loads(place.read_text())
            if isinstance(stored, dict) and {k: stored.get(k) for k in record} == record:
                digest = stored.get("sha256")
                if isinstance(digest, str) and len(digest) == 64:
                    return digest
    digest = hash_file(path)
    stat = path.stat()
    if (stat.st_size, stat.st_mtime_ns) == (size, mtime_ns):  # unchanged while hashing
        for place in places:
            with contextlib.suppress(OSError):
                place.parent.mkdir(parents=True, exist_ok=True)
                write_text_atomically(place, json.dumps({**record, "sha256": digest}))
                break
    return digest


def hash_file(path: Path) -> str:
    """The file's SHA-256, hashed now (no cache): see `file_sha256` for the remembered one."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _sidecar_places(path: Path) -> list[Path]:
    """Beside the file first; else the user cache folder, named after the file's full path."""
    beside = path.with_name(path.name + ".sha256.json")
    cache_root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    tag = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return [beside, Path(cache_root) / "hearth" / "digests" / f"{path.name}-{tag}.json"]


def clear_caches() -> None:
    """Forget what this process has read (tests; a later start behaves like this)."""
    _cached_summary.cache_clear()
    _cached_sha256.cache_clear()
