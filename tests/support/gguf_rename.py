"""A copy of a GGUF file with another `general.name`: a second, different model for the tests
(its own digest, size and metadata) made of the bundled weights.

Only the header changes. The gguf package's own rewriter (gguf_new_metadata) parses every
metadata array into Python objects first, ~25 s for the bundled model's 262k-token vocabulary
on 2 cores; here the header is walked without decoding it, the name's bytes are replaced, and
the tensor data is copied as it is after the padding the file's alignment asks for (tensor
offsets count from the start of the data, so they still hold).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# GGUF value types: fixed sizes in bytes; 8 is a string, 9 an array.
_FIXED_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


class _Walker:
    """Reads a little-endian GGUF header from bytes, keeping the position."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def number(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> bytes:
        length = self.number("<Q")
        self.pos += length
        return self.data[self.pos - length : self.pos]

    def skip_value(self, type_id: int) -> None:
        if type_id == _STRING:
            self.string()
        elif type_id == _ARRAY:
            item_type, count = self.number("<I"), self.number("<Q")
            if item_type in _FIXED_SIZES:
                self.pos += _FIXED_SIZES[item_type] * count
            else:
                for _ in range(count):
                    self.skip_value(item_type)
        else:
            self.pos += _FIXED_SIZES[type_id]


def _header_layout(data: bytes) -> tuple[tuple[int, int], int, int]:
    """((start, end) of general.name's string, length prefix included), the header's end,
    the alignment."""
    assert data[:4] == GGUF_MAGIC, "not a GGUF file"
    walker = _Walker(data, 8)  # after the magic and the version
    tensor_count, kv_count = walker.number("<Q"), walker.number("<Q")
    name_span, alignment = None, DEFAULT_ALIGNMENT
    for _ in range(kv_count):
        key, type_id = walker.string(), walker.number("<I")
        if key == b"general.name":
            assert type_id == _STRING
            start = walker.pos
            walker.string()
            name_span = (start, walker.pos)
        elif key == b"general.alignment":
            alignment = walker.number("<I")
        else:
            walker.skip_value(type_id)
    for _ in range(tensor_count):  # name, dimensions, type, offset
        walker.string()
        dimensions = walker.number("<I")
        walker.pos += 8 * dimensions + 4 + 8
    assert name_span is not None, "the file has no general.name"
    return name_span, walker.pos, alignment


def renamed_copy(source: Path, target: Path, name: str) -> Path:
    """`source` copied to `target` with `general.name` set to `name`. Made once per target."""
    if target.exists():
        return target
    # The header is at the start; 64 MiB is far more than any header of a model we test with.
    with source.open("rb") as handle:
        head = handle.read(64 * 2**20)
    (name_start, name_end), header_end, alignment = _header_layout(head)
    data_start = -(-header_end // alignment) * alignment
    encoded = name.encode()
    header = b"".join(
        [head[:name_start], struct.pack("<Q", len(encoded)), encoded, head[name_end:header_end]]
    )
    partial = target.with_name(target.name + ".part")
    with source.open("rb") as old, partial.open("wb") as new:
        new.write(header + bytes(-len(header) % alignment))
        old.seek(data_start)
        shutil.copyfileobj(old, new, 2**20)
    partial.rename(target)
    return target
