"""Whether a sound's bytes hold samples llama.cpp's decoder (miniaudio: dr_wav, minimp3,
dr_flac) will read: `check_sound` walks a WAV's chunks to its samples, an MP3's ID3 tags to its
first two frame headers, a FLAC's metadata blocks (STREAMINFO first) to its first frame. A
file that fails here would otherwise fail only once its request runs, inside the engine.
Every problem is a `MediaFormatError` whose message is one line for the client.

As in server/dialects/media/media_headers.py (which tells the format), each walk is bounded by the
data's length and a cap on its steps.
"""

from __future__ import annotations

import re
import struct

from server.dialects.media.media_headers import (
    FLAC,
    MP3,
    WAV,
    Format,
    MediaFormatError,
    is_mpeg_audio_frame,
)

# Chunks before a WAV's samples: real files have a handful (fmt, fact, LIST, bext, cue).
MAX_WAV_CHUNKS = 1_000
# The data sizes a WAV writer that streams leaves when it cannot go back to fill in the length:
# the samples run to the end of the file.
_WAV_UNKNOWN_SIZES = frozenset({0, 0xFFFFFFFF})
# ID3v2 tags before an MP3's first frame (one, in practice; an editor may stack a second) and
# FLAC metadata blocks before its frames (a handful: seek table, comments, pictures).
MAX_ID3_TAGS = 8
MAX_FLAC_BLOCKS = 1_000

_ZEROS = re.compile(rb"\x00*")  # padding some taggers leave after an ID3 tag
# MPEG audio bitrates (kbit/s) by index, for (MPEG-1?, layer); MPEG-2 and 2.5 share layer
# II's row with layer III.
_MPEG_BITRATES = {
    (True, 1): (0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}


def check_sound(data: bytes, fmt: Format) -> None:
    """Refuse a sound cut short or without samples: llama.cpp's decoder reads what a cut WAV
    holds, and fails on one without samples (or an MP3 without frames, a FLAC without its
    stream's facts) only when the request is already running."""
    if fmt is WAV:
        _check_wav(data)
    elif fmt is MP3:
        _check_mp3(data)
    elif fmt is FLAC:
        _check_flac(data)


def _check_wav(data: bytes) -> None:
    """RIFF chunks (id, little-endian size, data padded to an even length) from after the
    WAVE form up to `data`, with a `fmt ` chunk before it; then all the bytes `data` says."""
    chunk = struct.Struct("<4sI")
    pos, size, has_format = 12, len(data), False
    for _ in range(MAX_WAV_CHUNKS):
        if pos + 8 > size:
            raise _cut_sound(data, "without its data chunk")
        kind, length = chunk.unpack_from(data, pos)
        pos += 8
        if kind == b"data":
            break
        has_format = has_format or kind == b"fmt "
        pos += length + (length & 1)
    else:
        raise _unreadable("WAV", f"more than {MAX_WAV_CHUNKS} chunks before its samples")
    if not has_format:
        raise MediaFormatError("the WAV has no format (fmt) chunk before its samples")
    if length in _WAV_UNKNOWN_SIZES:
        length = size - pos
    if length == 0:
        raise MediaFormatError("the WAV has no samples")
    if pos + length > size:
        raise _cut_sound(data, f"whose data chunk says {length} bytes")


def _check_mp3(data: bytes) -> None:
    """Past any ID3v2 tags (and zeros after them), a frame header where the first frame
    starts, and a like one where its length says the second does: minimp3 (llama.cpp's
    decoder) takes a stream only when two frames agree, or when it is one frame alone."""
    pos, size = 0, len(data)
    for _ in range(MAX_ID3_TAGS):
        if not data.startswith(b"ID3", pos):
            break
        tag = data[pos + 6 : pos + 10]
        if len(tag) < 4 or any(byte & 0x80 for byte in tag):  # a "syncsafe" size: 7 bits a byte
            raise _unreadable("MP3", "its ID3 tag has no size")
        footer = 10 if data[pos + 5] & 0x10 else 0
        pos += 10 + footer + sum(byte << (21 - 7 * index) for index, byte in enumerate(tag))
    zeros = _ZEROS.match(data, min(pos, size))
    pos = zeros.end() if zeros and pos < size else pos
    if pos >= size:
        raise MediaFormatError("the MP3 has no audio frames")
    first = _mpeg_frame_length(data, pos)
    if first is None:
        raise MediaFormatError(f"the MP3 has no audio frame where its first should be (byte {pos})")
    second = pos + first
    if first == 0 or second == size:  # free format (no length in the header), or one frame
        return
    if second > size:
        raise _cut_sound(data, f"whose first frame needs {first} bytes", MP3)
    if _mpeg_frame_length(data, second) is None or not _same_stream(data, pos, second):
        raise MediaFormatError(
            f"the MP3's first audio frame is not followed by another (byte {second})"
        )


def _mpeg_frame_length(data: bytes, at: int) -> int | None:
    """The length of the MPEG audio frame whose header is at `at`: 0 for free format (the
    header does not say), None when no header is there."""
    header = data[at : at + 4]
    if len(header) < 4 or not is_mpeg_audio_frame(header):
        return None
    version, layer = (header[1] >> 3) & 3, 4 - ((header[1] >> 1) & 3)  # layer 1, 2 or 3
    mpeg1 = version == 3
    table = _MPEG_BITRATES[(mpeg1, layer if mpeg1 or layer == 1 else 2)]
    bitrate = table[header[2] >> 4] * 1000
    rate = (44100, 48000, 32000)[(header[2] >> 2) & 3] >> (3 - version if version else 2)
    padding = (header[2] >> 1) & 1
    if layer == 1:
        return (12 * bitrate // rate + padding) * 4
    return (144 if mpeg1 or layer == 2 else 72) * bitrate // rate + padding


def _same_stream(data: bytes, first: int, second: int) -> bool:
    """Two frame headers of one stream: version, layer, sample rate alike (minimp3's test)."""
    return (data[first + 1] ^ data[second + 1]) & 0xFE == 0 and (
        data[first + 2] ^ data[second + 2]
    ) & 0x0C == 0


def _check_flac(data: bytes) -> None:
    """A STREAMINFO first (34 bytes, a sample rate), the metadata blocks to the last one,
    then a frame's sync code."""
    if len(data) < 42:
        raise _cut_sound(data, "whose STREAMINFO runs past the end", FLAC)
    if data[4] & 0x7F != 0 or int.from_bytes(data[5:8], "big") != 34:
        raise _unreadable("FLAC", "its first metadata block is not STREAMINFO")
    largest_block = int.from_bytes(data[10:12], "big")
    rate = int.from_bytes(data[18:21], "big") >> 4
    if rate == 0 or largest_block < 16:
        raise _unreadable("FLAC", f"its STREAMINFO says {rate} Hz, blocks of {largest_block}")
    pos, size = 4, len(data)
    for _ in range(MAX_FLAC_BLOCKS):
        if pos + 4 > size:
            raise _cut_sound(data, "whose metadata runs past the end", FLAC)
        last = data[pos] & 0x80
        pos += 4 + int.from_bytes(data[pos + 1 : pos + 4], "big")
        if last:
            break
    else:
        raise _unreadable("FLAC", f"more than {MAX_FLAC_BLOCKS} metadata blocks")
    if pos > size:
        raise _cut_sound(data, "whose metadata runs past the end", FLAC)
    if pos == size:
        raise MediaFormatError("the FLAC has no audio frames")
    if data[pos : pos + 2] not in (b"\xff\xf8", b"\xff\xf9"):
        raise MediaFormatError(f"the FLAC has no audio frame after its metadata (byte {pos})")


def _cut_sound(data: bytes, how: str, fmt: Format = WAV) -> MediaFormatError:
    article = "an" if fmt is MP3 else "a"
    return MediaFormatError(f"audio is truncated ({len(data)} bytes of {article} {fmt.name} {how})")


def _unreadable(name: str, why: str) -> MediaFormatError:
    return MediaFormatError(f"the {name} header cannot be read ({why})")
