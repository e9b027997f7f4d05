"""What a media file is, from its first bytes and its headers alone: no pixel is decoded.

`sniff` names the format (PNG, JPEG, GIF, BMP; WAV, MP3, FLAC) by its magic bytes, as
llama.cpp's multimodal helper tells audio from images; `unsupported` names the formats people
send that llama.cpp cannot read (WebP, HEIC, …), so the client is told which; `image_size`
reads an image's width and height from its header; `check_complete` walks its structure far
enough to tell a truncated file (a sound's walk is server/dialects/media/sound_headers.py). Every
problem is a `MediaFormatError` whose message is one line for the client;
server/dialects/media/media.py turns it into the dialect's 400.

Each walk is bounded by the data's length and advances on every step; runs of filler (JPEG's
0xFF fill bytes) are skipped with one regex, and the number of chunks or markers is capped, so
no input, however hostile, makes these loops long.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

# Far more chunks than any encoder writes (libpng: one IDAT per 8 KB; the odd encoder one per
# row); the cap keeps a file of millions of empty chunks from costing seconds to walk.
MAX_PNG_CHUNKS = 200_000
# Markers before a JPEG's first scan: real files have tens (APPn, DQT, DHT, SOF, DRI, COM).
MAX_JPEG_MARKERS = 10_000


class MediaFormatError(ValueError):
    """Bytes that are not a usable media file; the message says why, for the client."""


@dataclass(frozen=True, slots=True)
class Format:
    name: str  # "PNG", as said to the client
    kind: str  # "image" or "audio"
    mime: str

    @property
    def described(self) -> str:
        return f"a {self.name} image" if self.kind == "image" else f"{self.name} audio"


PNG = Format("PNG", "image", "image/png")
JPEG = Format("JPEG", "image", "image/jpeg")
GIF = Format("GIF", "image", "image/gif")
BMP = Format("BMP", "image", "image/bmp")
WAV = Format("WAV", "audio", "audio/wav")
MP3 = Format("MP3", "audio", "audio/mpeg")
FLAC = Format("FLAC", "audio", "audio/flac")

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# ISO media files ("....ftyp<brand>"): what each brand is, for the refusal.
_FTYP_BRANDS = {
    **dict.fromkeys((b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx"), "HEIC images are"),
    **dict.fromkeys((b"mif1", b"msf1"), "HEIF images are"),
    **dict.fromkeys((b"avif", b"avis"), "AVIF images are"),
}
_FTYP_AUDIO = frozenset({b"M4A ", b"M4B "})
# Formats named by their first bytes: (magic, offset, what they are, kind).
_MAGIC = (
    (b"II*\x00", 0, "TIFF images are", "image"),
    (b"MM\x00*", 0, "TIFF images are", "image"),
    (b"8BPS", 0, "Photoshop (PSD) images are", "image"),
    (b"\xff\x0a", 0, "JPEG XL images are", "image"),
    (b"JXL \r\n\x87\n", 4, "JPEG XL images are", "image"),
    (b"OggS", 0, "Ogg audio is", "audio"),
    (b"\x1aE\xdf\xa3", 0, "WebM/Matroska files are", "video"),
    (b"%PDF", 0, "PDF documents are", "document"),
)
_RIFF_FORMS = {b"WEBP": ("WebP images are", "image"), b"AVI ": ("AVI video is", "video")}
_JPEG_FILL = re.compile(rb"\xff*")
# JPEG markers without a length: TEM, RST0-7, SOI, EOI.
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xDA)})
# Start-of-frame markers (the others in C0-CF are DHT, JPG and DAC).
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# stb_image (llama.cpp's decoder) reads baseline, extended and progressive Huffman JPEGs only.
_JPEG_SOF_READ = frozenset({0xC0, 0xC1, 0xC2})
_PNG_DEPTHS = {0: {1, 2, 4, 8, 16}, 2: {8, 16}, 3: {1, 2, 4, 8}, 4: {8, 16}, 6: {8, 16}}
# The BMP header sizes stb_image reads (core, info, v2/v3 info, v4, v5).
_BMP_HEADERS = frozenset({12, 40, 52, 56, 108, 124})


def sniff(data: bytes) -> Format | None:
    """The format `data` is in by its magic bytes, or None. Audio needs 12 bytes, as in
    llama.cpp's check (a shorter file would be tried as an image there)."""
    if data.startswith(_PNG_SIGNATURE):
        return PNG
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if data.startswith(b"BM"):
        return BMP
    if len(data) < 12:
        return None
    if data.startswith(b"RIFF") and data[8:12] == b"WAVE":
        return WAV
    if data.startswith(b"fLaC"):
        return FLAC
    if data.startswith(b"ID3") or is_mpeg_audio_frame(data):
        return MP3
    return None


def is_mpeg_audio_frame(data: bytes) -> bool:
    """An MPEG audio frame header: 11 sync bits, then no reserved version, layer, bitrate or
    sample rate (which also tells AAC's ADTS header, layer 0, from MP3)."""
    if data[0] != 0xFF or data[1] & 0xE0 != 0xE0:
        return False
    version, layer = (data[1] >> 3) & 3, (data[1] >> 1) & 3
    bitrate, rate = data[2] >> 4, (data[2] >> 2) & 3
    return version != 1 and layer != 0 and bitrate != 15 and rate != 3


def unsupported(data: bytes) -> tuple[str, str] | None:
    """("WebP images are", "image") for a format recognised but not taken, else None."""
    if data.startswith(b"RIFF") and data[8:12] in _RIFF_FORMS:
        return _RIFF_FORMS[data[8:12]]
    if data[4:8] == b"ftyp":
        brand = data[8:12]
        if brand in _FTYP_AUDIO:
            return "M4A (AAC) audio is", "audio"
        what = _FTYP_BRANDS.get(brand)
        return (what, "image") if what else ("MP4/QuickTime files are", "video")
    for magic, offset, what, kind in _MAGIC:
        if data[offset : offset + len(magic)] == magic:
            return what, kind
    if len(data) > 1 and data[0] == 0xFF and data[1] & 0xF6 == 0xF0:  # ADTS: MPEG sync with layer 0
        return "AAC audio is", "audio"
    if data.startswith(b"FORM") and data[8:12] in (b"AIFF", b"AIFC"):
        return "AIFF audio is", "audio"
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith((b"<svg", b"<!DOCTYPE svg")) or (
        head.startswith(b"<?xml") and b"<svg" in head
    ):
        return "SVG images are", "image"
    return None


def image_size(data: bytes, fmt: Format) -> tuple[int, int]:
    """(width, height) from the header of an image in `fmt`; a BMP's may be negative there
    (rows stored top-down) and is given as its size."""
    if fmt is PNG:
        return _png_size(data)
    if fmt is JPEG:
        return _jpeg_size(data)
    if fmt is GIF:
        if len(data) < 10:
            raise _truncated(data, fmt, "whose header runs past the end")
        return _u16le(data, 6), _u16le(data, 8)
    if fmt is BMP:
        return _bmp_header(data)[:2]
    raise ValueError(f"not an image format: {fmt.name}")


def check_complete(data: bytes, fmt: Format) -> None:
    """Refuse an image cut short: PNG chunks up to IEND, a JPEG's markers up to its scan and
    its end marker, a GIF's trailer, a BMP's declared file size and pixel rows."""
    if fmt is PNG:
        _check_png_chunks(data)
    elif fmt is JPEG:
        _check_jpeg(data)
    elif fmt is GIF:
        if not data.rstrip(b"\x00").endswith(b"\x3b"):  # trailing zero padding is harmless
            raise _truncated(data, fmt, "without its trailer")
    elif fmt is BMP:
        _check_bmp(data)


def _truncated(data: bytes, fmt: Format, how: str) -> MediaFormatError:
    return MediaFormatError(f"image is truncated ({len(data)} bytes of a {fmt.name} {how})")


def _unreadable(fmt: Format, why: str) -> MediaFormatError:
    return MediaFormatError(f"the {fmt.name} header cannot be read ({why})")


def _u16le(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "little")


def _png_size(data: bytes) -> tuple[int, int]:
    if len(data) < 33:
        raise _truncated(data, PNG, "whose header runs past the end")
    length, kind, width, height, depth, colour = struct.unpack_from(">I4sIIBB", data, 8)
    if kind != b"IHDR" or length != 13:
        raise _unreadable(PNG, "its first chunk is not IHDR")
    if depth not in _PNG_DEPTHS.get(colour, ()):
        raise _unreadable(PNG, f"bit depth {depth} with colour type {colour}")
    return width, height


def _check_png_chunks(data: bytes) -> None:
    """Each chunk is length, type, data, CRC; walk them by their lengths to IEND."""
    chunk = struct.Struct(">I4s")
    pos, size, has_pixels = 8, len(data), False
    for _ in range(MAX_PNG_CHUNKS):
        if pos + 12 > size:
            raise _truncated(data, PNG, "without its IEND end chunk")
        length, kind = chunk.unpack_from(data, pos)
        pos += 12 + length
        if pos > size:
            raise _truncated(data, PNG, "whose data runs past the end")
        if kind == b"IEND":
            break
        has_pixels = has_pixels or kind == b"IDAT"
    else:
        raise _unreadable(PNG, f"more than {MAX_PNG_CHUNKS} chunks")
    if not has_pixels:
        raise MediaFormatError("the PNG has no image data (no IDAT chunk)")


def _jpeg_segments(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(marker, start, end) of each marker's payload after SOI, up to and including the first
    scan (SOS) or EOI; fill bytes before a marker are skipped, standalone markers have none."""
    pos, size = 2, len(data)
    for _ in range(MAX_JPEG_MARKERS):
        if pos >= size:
            break
        if data[pos] != 0xFF:
            raise _unreadable(JPEG, f"no marker at byte {pos}")
        fill = _JPEG_FILL.match(data, pos)
        pos = fill.end() if fill else pos
        if pos >= size:
            break
        marker, pos = data[pos], pos + 1
        if marker == 0x00:
            raise _unreadable(JPEG, f"a bad marker at byte {pos - 2}")
        if marker in _JPEG_STANDALONE:
            yield marker, pos, pos
            if marker == 0xD9:
                return
            continue
        if pos + 2 > size:
            break
        end = pos + int.from_bytes(data[pos : pos + 2], "big")
        if end > size:
            break
        if end < pos + 2:
            raise _unreadable(JPEG, f"a marker's length under 2 at byte {pos}")
        yield marker, pos + 2, end
        if marker == 0xDA:
            return
        pos = end
    else:
        raise _unreadable(JPEG, f"more than {MAX_JPEG_MARKERS} markers before the image data")
    raise _truncated(data, JPEG, "whose header runs past the end")


def _jpeg_size(data: bytes) -> tuple[int, int]:
    for marker, start, end in _jpeg_segments(data):
        if marker in _JPEG_SOF:
            if end - start < 6:
                raise _unreadable(JPEG, "its frame header is too short")
            if marker not in _JPEG_SOF_READ:
                raise MediaFormatError(
                    "lossless and arithmetic-coded JPEGs are not supported: "
                    "send a baseline or progressive JPEG"
                )
            height, width = struct.unpack_from(">HH", data, start + 1)
            return width, height
        if marker in (0xDA, 0xD9):
            break
    raise _unreadable(JPEG, "no frame header before the image data")


def _check_jpeg(data: bytes) -> None:
    """The markers run up to a scan (not EOI first), and the file ends with EOI."""
    last = 0
    for marker, _start, _end in _jpeg_segments(data):
        last = marker
    if last != 0xDA:
        raise MediaFormatError("the JPEG has no image data (no scan before its end)")
    if not data.rstrip(b"\x00").endswith(b"\xff\xd9"):  # encoders may pad with zeros
        raise _truncated(data, JPEG, "without its end marker")


def _bmp_header(data: bytes) -> tuple[int, int, int, int]:
    """(width, height, bits per pixel, compression) of a BMP; height negative means top-down."""
    if len(data) < 26:
        raise _truncated(data, BMP, "whose header runs past the end")
    header = int.from_bytes(data[14:18], "little")
    if header not in _BMP_HEADERS:
        raise _unreadable(BMP, f"an unknown header of {header} bytes")
    if header == 12:  # OS/2 core header: 16-bit sizes, no compression
        return _u16le(data, 18), _u16le(data, 20), _u16le(data, 24), 0
    if len(data) < 34:
        raise _truncated(data, BMP, "whose header runs past the end")
    width, height, _planes, bits, compression = struct.unpack_from("<iiHHI", data, 18)
    if width < 0:
        raise _unreadable(BMP, f"a negative width, {width}")
    return width, abs(height), bits, compression


def _check_bmp(data: bytes) -> None:
    """The file-size field (0 in some writers) and, uncompressed, the rows the header implies."""
    declared = int.from_bytes(data[2:6], "little")
    if declared > len(data):
        raise _truncated(data, BMP, f"whose header says {declared} bytes")
    width, height, bits, compression = _bmp_header(data)
    if compression not in (0, 3) or bits not in (1, 4, 8, 16, 24, 32) or not width or not height:
        return  # compressed rows have no fixed size; no rows, nothing to check
    offset = int.from_bytes(data[10:14], "little")
    stride = (width * bits + 31) // 32 * 4
    needed = offset + stride * (height - 1) + (width * bits + 7) // 8  # last row's padding may go
    if needed > len(data):
        raise _truncated(data, BMP, f"whose pixels need {needed} bytes")
