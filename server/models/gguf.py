"""What a GGUF file says about itself, read cheaply: its header, never its tensor data.

`gguf_summary(path)` parses the header (metadata and tensor table) and checks that the tensor
data it describes fits in the file, so a truncated download or a file that is not a GGUF at all
is refused with a one-line `GGUFFormatError` before llama.cpp's loader sees it. Results are
cached per process by path, size and modification time.

The header is parsed here with `struct` over a read-only memory map instead of `gguf`'s
`GGUFReader`: the reader builds a numpy view for every element of every array, which takes tens
of seconds on a 262,144-token vocabulary; skipping arrays takes a fraction of a second and
touches only the header's pages. The `gguf` package still supplies the format's tables (value
types, quantization block sizes, file-type names).

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
import mmap
import os
import struct
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO, Final

from gguf import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType, LlamaFileType

from server.base.atomic_file import write_text_atomically

MetadataValue = int | float | bool | str | tuple["MetadataValue", ...] | None

SUPPORTED_VERSIONS: Final = (2, 3)  # what llama.cpp reads
DEFAULT_ALIGNMENT: Final = 32
LARGE_ARRAY: Final = 64  # arrays longer than this (the vocabulary) are skipped, kept as None
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SCALARS: Final[dict[int, struct.Struct]] = {
    GGUFValueType.UINT8: struct.Struct("<B"),
    GGUFValueType.INT8: struct.Struct("<b"),
    GGUFValueType.UINT16: struct.Struct("<H"),
    GGUFValueType.INT16: struct.Struct("<h"),
    GGUFValueType.UINT32: struct.Struct("<I"),
    GGUFValueType.INT32: struct.Struct("<i"),
    GGUFValueType.FLOAT32: struct.Struct("<f"),
    GGUFValueType.BOOL: struct.Struct("<?"),
    GGUFValueType.UINT64: struct.Struct("<Q"),
    GGUFValueType.INT64: struct.Struct("<q"),
    GGUFValueType.FLOAT64: struct.Struct("<d"),
}
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")


class GGUFFormatError(ValueError):
    """The file is not a usable GGUF; the message says why in one line (without the path)."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int  # from the start of the file
    n_bytes: int | None  # None for a quantization type this `gguf` package does not know

    @property
    def n_elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def type_name(self) -> str:
        try:
            return GGMLQuantizationType(self.type_id).name
        except ValueError:
            return f"type {self.type_id}"


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
        return _read_summary(handle, Path(path), mtime_ns)


def _read_summary(handle: BinaryIO, path: Path, mtime_ns: int) -> GGUFSummary:
    size = os.fstat(handle.fileno()).st_size  # what is there now, should it have just changed
    if size == 0:
        raise GGUFFormatError("not a GGUF file (it is empty)")
    with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        magic = view[:4]
        if len(magic) < 4 or _U32.unpack(magic)[0] != GGUF_MAGIC:
            raise GGUFFormatError(f"not a GGUF file (it starts with {bytes(view[:8])!r})")
        header = _Header(view, size, start=4)
        version = header.u32()
        if version & 0xFFFF == 0 and version:
            raise GGUFFormatError("big-endian GGUF files are not supported")
        if version not in SUPPORTED_VERSIONS:
            raise GGUFFormatError(
                f"GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)"
            )
        tensor_count = header.u64()
        kv_count = header.u64()
        header.need_room(kv_count, 13, "metadata entries")
        metadata: dict[str, MetadataValue] = {}
        for _ in range(kv_count):
            key = header.string()
            metadata[key] = header.value(header.u32(), key)
        header.need_room(tensor_count, 24, "tensors")
        table = [header.tensor_entry() for _ in range(tensor_count)]
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise GGUFFormatError(f"corrupt header: general.alignment is {alignment!r}")
        header_end = header.pos
    data_start = -(-header_end // alignment) * alignment
    tensors = tuple(
        _tensor(name, shape, type_id, data_start + rel) for name, shape, type_id, rel in table
    )
    needed = max((t.offset + (t.n_bytes or 0) for t in tensors), default=header_end)
    if needed > size:
        raise GGUFFormatError(f"truncated: {needed:,} bytes expected, {size:,} present")
    return GGUFSummary(path, size, mtime_ns, version, MappingProxyType(metadata), tensors)


def _tensor(name: str, shape: tuple[int, ...], type_id: int, offset: int) -> TensorInfo:
    n_bytes: int | None = None
    with contextlib.suppress(ValueError, KeyError):
        block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
        elements = 1
        for dim in shape:
            elements *= dim
        n_bytes = elements * type_size // block_size
    return TensorInfo(name, shape, type_id, offset, n_bytes)


class _Header:
    """A cursor over the mapped header; every read is bounds-checked against the file size."""

    def __init__(self, view: mmap.mmap, size: int, start: int) -> None:
        self.view = view
        self.size = size
        self.pos = start

    def take(self, count: int) -> int:
        start = self.pos
        end = start + count
        if end > self.size:
            raise _truncated_header(end, self.size)
        self.pos = end
        return start

    def need_room(self, count: int, least_bytes: int, what: str) -> None:
        if count * least_bytes > self.size - self.pos:
            raise GGUFFormatError(
                f"truncated or corrupt: the header lists {count:,} {what}, "
                f"more than the {self.size:,}-byte file can hold"
            )

    def u32(self) -> int:
        value: int = _U32.unpack_from(self.view, self.take(4))[0]
        return value

    def u64(self) -> int:
        value: int = _U64.unpack_from(self.view, self.take(8))[0]
        return value

    def string(self) -> str:
        length = self.u64()
        start = self.take(length)
        return self.view[start : start + length].decode("utf-8", errors="replace")

    def value(self, type_id: int, key: str) -> MetadataValue:
        scalar = _SCALARS.get(type_id)
        if scalar is not None:
            item: int | float | bool = scalar.unpack_from(self.view, self.take(scalar.size))[0]
            return item
        if type_id == GGUFValueType.STRING:
            return self.string()
        if type_id == GGUFValueType.ARRAY:
            item_type = self.u32()
            count = self.u64()
            if count > LARGE_ARRAY:
                self.skip_array(item_type, count, key)
                return None
            return tuple(self.value(item_type, key) for _ in range(count))
        raise GGUFFormatError(f"corrupt header: unknown value type {type_id} for {key!r}")

    def skip_array(self, item_type: int, count: int, key: str) -> None:
        scalar = _SCALARS.get(item_type)
        if scalar is not None:
            self.take(count * scalar.size)
        elif item_type == GGUFValueType.STRING:
            self.need_room(count, 8, f"strings in {key!r}")
            view, pos, size, unpack = self.view, self.pos, self.size, _U64.unpack_from
            for _ in range(count):  # the hot loop: a 262,144-token vocabulary
                if pos + 8 > size:
                    raise _truncated_header(pos + 8, size)
                pos += 8 + unpack(view, pos)[0]
            if pos > size:
                raise _truncated_header(pos, size)
            self.pos = pos
        else:
            for _ in range(count):
                self.value(item_type, key)

    def tensor_entry(self) -> tuple[str, tuple[int, ...], int, int]:
        name = self.string()
        n_dims = self.u32()
        if n_dims > 8:
            raise GGUFFormatError(f"corrupt header: tensor {name!r} has {n_dims} dimensions")
        shape = tuple(self.u64() for _ in range(n_dims))
        type_id = self.u32()
        return name, shape, type_id, self.u64()


def _truncated_header(needed: int, size: int) -> GGUFFormatError:
    return GGUFFormatError(
        f"truncated: the header needs at least {needed:,} bytes, {size:,} present"
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
