"""A GGUF file's header, parsed and checked: its version, metadata and tensor table.

Parsed here with `struct` over a read-only memory map instead of `gguf`'s `GGUFReader`: the
reader builds a numpy view for every element of every array, which takes tens of seconds on a
262,144-token vocabulary; skipping arrays takes a fraction of a second and touches only the
header's pages. The `gguf` package still supplies the format's tables (value types,
quantization block sizes). Every read is bounds-checked, and the tensor data the table
describes must fit in the file, so a truncated download or a file that is not a GGUF at all is
refused with a one-line `GGUFFormatError`. What the header means is server/models/gguf.py's.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import BinaryIO, Final

from gguf import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType

MetadataValue = int | float | bool | str | tuple["MetadataValue", ...] | None

SUPPORTED_VERSIONS: Final = (2, 3)  # what llama.cpp reads
DEFAULT_ALIGNMENT: Final = 32
LARGE_ARRAY: Final = 64  # arrays longer than this (the vocabulary) are skipped, kept as None
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
class GGUFHeader:
    """What the header says, and the file's size when it was read."""

    file_size: int
    version: int
    metadata: Mapping[str, MetadataValue]  # scalars and short arrays; long arrays are None
    tensors: tuple[TensorInfo, ...]


def read_header(handle: BinaryIO) -> GGUFHeader:
    """The open file's header, checked. Raises GGUFFormatError (not a GGUF, unsupported
    version, truncated, corrupt header)."""
    size = os.fstat(handle.fileno()).st_size  # what is there now, should it have just changed
    if size == 0:
        raise GGUFFormatError("not a GGUF file (it is empty)")
    with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        magic = view[:4]
        if len(magic) < 4 or _U32.unpack(magic)[0] != GGUF_MAGIC:
            raise GGUFFormatError(f"not a GGUF file (it starts with {bytes(view[:8])!r})")
        cursor = _HeaderCursor(view, size, start=4)
        version = _version(cursor.u32())
        tensor_count = cursor.u64()
        kv_count = cursor.u64()
        cursor.need_room(kv_count, 13, "metadata entries")
        metadata: dict[str, MetadataValue] = {}
        for _ in range(kv_count):
            key = cursor.string()
            metadata[key] = cursor.value(cursor.u32(), key)
        cursor.need_room(tensor_count, 24, "tensors")
        table = [cursor.tensor_entry() for _ in range(tensor_count)]
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise GGUFFormatError(f"corrupt header: general.alignment is {alignment!r}")
        header_end = cursor.pos
    data_start = -(-header_end // alignment) * alignment
    tensors = tuple(
        _tensor(name, shape, type_id, data_start + rel) for name, shape, type_id, rel in table
    )
    needed = max((t.offset + (t.n_bytes or 0) for t in tensors), default=header_end)
    if needed > size:
        raise GGUFFormatError(f"truncated: {needed:,} bytes expected, {size:,} present")
    return GGUFHeader(size, version, MappingProxyType(metadata), tensors)


def _version(version: int) -> int:
    if version & 0xFFFF == 0 and version:
        raise GGUFFormatError("big-endian GGUF files are not supported")
    if version not in SUPPORTED_VERSIONS:
        raise GGUFFormatError(
            f"GGUF version {version} is not supported (llama.cpp reads versions 2 and 3)"
        )
    return version


def _tensor(name: str, shape: tuple[int, ...], type_id: int, offset: int) -> TensorInfo:
    n_bytes: int | None = None
    with contextlib.suppress(ValueError, KeyError):
        block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(type_id)]
        elements = 1
        for dim in shape:
            elements *= dim
        n_bytes = elements * type_size // block_size
    return TensorInfo(name, shape, type_id, offset, n_bytes)


class _HeaderCursor:
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
