"""Real media files built byte by byte, each as small as its format allows: PNG (zlib), a
baseline JPEG assembled marker by marker, GIF89a (LZW), BMP, WAV (the `wave` module), MP3
frames (bare and after an ID3 tag), a FLAC of one frame, and the first bytes of formats Hearth
refuses (WebP, HEIC, AVIF, TIFF, SVG, Ogg). llama.cpp's own decoder reads the images at the
size their headers give (tests/server/dialects/media/test_media_checks.py checks it)."""

from __future__ import annotations

import io
import struct
import wave
import zlib
from pathlib import Path

# A 16x16 JPEG from CPython's test data (imghdrdata/python.jpg), as an encoder wrote it.
FIXTURE_JPEG = Path(__file__).parent.parent / "fixtures" / "python.jpg"


def png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data)
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png_bytes(width: int = 3, height: int = 2, *, depth: int = 8, colour: int = 0) -> bytes:
    """An 8-bit greyscale PNG with a gradient (other depth/colour only for the header)."""
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    rows = b"".join(
        b"\x00" + bytes((x * 40 + y * 90) % 256 for x in range(width)) for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(rows))
        + png_chunk(b"IEND", b"")
    )


def png_header_only(width: int, height: int) -> bytes:
    """Signature, IHDR and IEND: a few dozen bytes that claim any size."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IEND", b"")


def jpeg_segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def jpeg_bytes(
    width: int = 8,
    height: int = 8,
    *,
    frame_marker: int = 0xC0,
    before_frame: bytes = b"",
    scan: bytes | None = None,
) -> bytes:
    """A greyscale baseline JPEG: one quantisation table, one-code Huffman tables (DC
    category 0 and AC end-of-block, each coded "0"), so every 8x8 block is two bits; the
    image is mid-grey. A progressive one (`frame_marker=0xC2`) has its DC scan only.
    `before_frame` goes between APP0 and the tables (other segments, fill bytes, standalone
    markers); `scan` replaces the entropy-coded data."""
    progressive = frame_marker == 0xC2  # one scan of DC only: one bit per block
    if scan is None:
        blocks = -(-width // 8) * -(-height // 8)
        bits = (1 if progressive else 2) * blocks
        scan = bytes(bits // 8) + (bytes([0xFF >> bits % 8]) if bits % 8 else b"")  # 1-padded
    one_code = bytes([1] + [0] * 15) + b"\x00"  # one code of length 1 for symbol 0
    return (
        b"\xff\xd8"
        + jpeg_segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
        + before_frame
        + jpeg_segment(0xDB, b"\x00" + bytes([1] * 64))
        + jpeg_segment(frame_marker, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00")
        + jpeg_segment(0xC4, b"\x00" + one_code)
        + jpeg_segment(0xC4, b"\x10" + one_code)
        + jpeg_segment(0xDA, b"\x01\x01\x00\x00" + (b"\x00" if progressive else b"\x3f") + b"\x00")
        + scan
        + b"\xff\xd9"
    )


def _lzw_sub_blocks(pixels: list[int]) -> bytes:
    """GIF image data with a minimum code size of 2: a clear code before each pixel keeps
    every code 3 bits (clear = 4, end = 5), packed low bit first, in sub-blocks of 255."""
    codes = [code for pixel in pixels for code in (4, pixel)] + [5]
    value = sum(code << (3 * index) for index, code in enumerate(codes))
    data = value.to_bytes(-(-3 * len(codes) // 8), "little")
    blocks = b"".join(bytes([len(part)]) + part for part in _parts(data, 255))
    return b"\x02" + blocks + b"\x00"


def _parts(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


def gif_bytes(width: int = 3, height: int = 2) -> bytes:
    """A GIF89a of black and white pixels in a two-colour global palette."""
    screen = struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    descriptor = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0)
    pixels = [(x + y) % 2 for y in range(height) for x in range(width)]
    return b"GIF89a" + screen + descriptor + _lzw_sub_blocks(pixels) + b"\x3b"


def gif_header_only(width: int, height: int) -> bytes:
    """A logical screen of any size, no image, the trailer."""
    return b"GIF89a" + struct.pack("<HHBBB", width, height, 0, 0, 0) + b"\x3b"


def bmp_bytes(width: int = 3, height: int = 2, *, top_down: bool = False) -> bytes:
    """A 24-bit uncompressed BMP (BITMAPINFOHEADER); rows padded to four bytes."""
    stride = (width * 3 + 3) // 4 * 4
    row = bytes((x * 70) % 256 for x in range(width * 3)).ljust(stride, b"\x00")
    pixels = row * height
    info = struct.pack(
        "<IiiHHIIiiII", 40, width, -height if top_down else height, 1, 24, 0, len(pixels),
        2835, 2835, 0, 0,
    )  # fmt: skip
    size = 14 + len(info) + len(pixels)
    return b"BM" + struct.pack("<IHHI", size, 0, 0, 54) + info + pixels


def wav_bytes(frames: int = 80) -> bytes:
    """Mono 16-bit PCM at 8 kHz, written by the `wave` module."""
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(8000)
        writer.writeframes(b"".join(struct.pack("<h", (i * 500) % 8000) for i in range(frames)))
    return out.getvalue()


def mp3_bytes(*, id3: bool = False) -> bytes:
    """Two silent MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz: 417 bytes each), optionally
    after an ID3v2.4 tag of ten bytes of padding."""
    frame = b"\xff\xfb\x90\x64".ljust(417, b"\x00")
    tag = b"ID3\x04\x00\x00\x00\x00\x00\x0a" + bytes(10) if id3 else b""
    return tag + frame * 2


def flac_bytes() -> bytes:
    """A last-block STREAMINFO (44.1 kHz, mono, 16-bit, 192 samples) and one frame of 192
    samples of silence: a CONSTANT subframe of 0, with the header's CRC-8 and the frame's
    CRC-16."""
    rate_channels_bits = (44100 << 44 | 0 << 41 | 15 << 36 | 192).to_bytes(8, "big")
    info = struct.pack(">HH", 192, 192) + bytes(6) + rate_channels_bits + bytes(16)  # MD5
    # Sync and fixed blocking; 192 samples (code 1) at 44.1 kHz (code 9); mono, 16-bit
    # (code 4); frame number 0.
    header = b"\xff\xf8\x19\x08\x00"
    frame = header + bytes([_crc(header, 8, 0x07)]) + b"\x00" + bytes(2)  # CONSTANT 0
    frame += _crc(frame, 16, 0x8005).to_bytes(2, "big")
    return b"fLaC" + bytes([0x80, 0, 0, len(info)]) + info + frame


def _crc(data: bytes, width: int, poly: int) -> int:
    """FLAC's CRC-8 or CRC-16: most significant bit first, starting at 0."""
    top, mask, crc = 1 << (width - 1), (1 << width) - 1, 0
    for byte in data:
        crc ^= byte << (width - 8)
        for _ in range(8):
            crc = ((crc << 1) ^ poly if crc & top else crc << 1) & mask
    return crc


def webp_bytes() -> bytes:
    body = b"WEBPVP8L" + struct.pack("<I", 6) + b"\x2f\x00\x00\x00\x00\x00"
    return b"RIFF" + struct.pack("<I", len(body)) + body


def ftyp_bytes(brand: bytes) -> bytes:
    """The start of an ISO media file (HEIC, AVIF, MP4, M4A) with `brand`."""
    return struct.pack(">I", 24) + b"ftyp" + brand + b"\x00\x00\x00\x00" + b"mif1" + b"\x00" * 8


TIFF_BYTES = b"II*\x00\x08\x00\x00\x00" + bytes(16)
SVG_BYTES = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="4"/>'
OGG_BYTES = b"OggS\x00\x02" + bytes(22)


def huge_png(width: int, height: int, colour: tuple[int, int, int]) -> bytes:
    """An RGB PNG of one colour, of any size, in about a second: its first row filtered
    "none", every other "up" (zeros, the same as the row above), compressed once for a
    block of rows and that block's bytes repeated (each ends in a full flush, so none
    refers to the one before). 20000 x 20000 is about 1.2 MB, and 1.2 GB decoded."""
    first = b"\x00" + bytes(colour) * width
    same = b"\x02" + bytes(3 * width)
    block_rows = max(1, min(height - 1, 1000))
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [deflate.compress(first) + deflate.flush(zlib.Z_FULL_FLUSH)]
    block = deflate.compress(same * block_rows) + deflate.flush(zlib.Z_FULL_FLUSH)
    left = deflate.compress(same * ((height - 1) % block_rows)) + deflate.flush(zlib.Z_FULL_FLUSH)
    blocks = (height - 1) // block_rows
    checksum = zlib.adler32(first)
    for _ in range(blocks):
        checksum = zlib.adler32(same * block_rows, checksum)
    checksum = zlib.adler32(same * ((height - 1) % block_rows), checksum)
    # zlib's header, the blocks, an empty final block (fixed codes), the Adler-32 of it all.
    stream = b"\x78\xda" + b"".join([*parts, block * blocks, left, b"\x03\x00"])
    stream += struct.pack(">I", checksum)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", stream)
        + png_chunk(b"IEND", b"")
    )
