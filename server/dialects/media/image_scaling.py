"""Images too large to decode whole, scaled down with bounded memory before llama.cpp sees them.

llama.cpp's image decoder (stb_image) decodes a whole image into memory before anything resizes
it: a 20000 x 20000 PNG of a few megabytes would take 1.2 GB, and every projector scales its
input to a few hundred pixels a side anyway. So an image over MAX_DECODED_PIXELS (checked from
its header at the edge, server/dialects/media/media.py) is decoded here a strip at a time and
averaged down as it goes, never held whole, then handed on as a small PNG:

- PNG (not interlaced): the zlib stream is inflated a strip of rows at a time; each strip,
  behind its previous row, is unfiltered by Pillow's own PNG decoder, then averaged in blocks.
  Memory: a strip (~16 MB) and the result.
- JPEG (baseline): libjpeg decodes at 1/2, 1/4 or 1/8 scale directly (Pillow's `draft`), so
  the full size never exists; then Pillow resizes. A progressive JPEG keeps every coefficient
  of the whole image while decoding (1.2 GB at that size): refused, with what to do instead.
- GIF and BMP that large: refused the same way (GIF's LZW stream and a run-length BMP cannot
  be read a strip at a time by any decoder at hand; an uncompressed BMP cannot be that large
  within the request's 20 MB).

Long work: a 20000 x 20000 PNG takes a few seconds on 2 cores, so the routes run this on a
worker thread, one image at a time (server/dialects/pipeline/routing.py), while the event loop
serves other clients.
"""

from __future__ import annotations

import asyncio
import io
import math
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
from PIL import Image

from server.core.types import MAX_DECODED_IMAGE_PIXELS, GenerationRequest, MediaInput
from server.dialects.edge.errors import APIError, Dialect, ErrorKind

MAX_DECODED_PIXELS = MAX_DECODED_IMAGE_PIXELS
# What is scaled down at all: 20000 x 20000 takes seconds to inflate; larger is refused, so
# that one request cannot hold a core for minutes.
MAX_SCALED_PIXELS = 400_000_000
# The longer side of a scaled-down image: above every projector's own input size in
# llama.cpp (Gemma 3: 896; LLaVA: 336-672; Pixtral/Mistral: 1024-1540), so no detail a model
# could see is lost, and small enough to decode in 12 MB.
SCALED_LONGEST_SIDE = 2048
# Rows inflated at once (with the strip's unfiltered copy and its block sums): ~16 MB a strip.
STRIP_BYTES = 16 * 1024 * 1024
# Pillow guards against "decompression bombs" by refusing huge sizes at open; this module
# bounds its own memory (draft decoding, strips), so that guard is lifted for its calls.
Image.MAX_IMAGE_PIXELS = None

# PNG's colour type -> Pillow's mode for its 8-bit rows (raw mode the same: bytes copied as
# they are, so a strip's last row can be handed on as the next strip's row above).
_PNG_MODES = {0: "L", 2: "RGB", 3: "P", 4: "LA", 6: "RGBA"}
# Samples per pixel in the file, by colour type (what a filtered row's length counts).
_PNG_SAMPLES = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


# One image scaled at a time, whichever requests send them: each takes a core for seconds.
_ONE_AT_A_TIME = threading.Lock()


class ScalingError(ValueError):
    """The image cannot be scaled down (said to the client as a 400)."""


async def with_images_scaled(request: GenerationRequest, dialect: Dialect) -> GenerationRequest:
    """`request` with each image too large to decode whole scaled down, on a worker thread
    (the event loop goes on serving meanwhile); a 400 in the dialect's shape when one cannot
    be."""
    media = request.media
    if not any(needs_scaling(item) for item in media):
        return request
    scaled = []
    for index, item in enumerate(media):
        try:
            scaled.append(await asyncio.to_thread(_scaled_in_turn, item))
        except ScalingError as exc:
            message = f"Image {index + 1}: {exc}"
            raise APIError(400, message, ErrorKind.BAD_INPUT, dialect) from None
    return replace(request, media=tuple(scaled))


def _scaled_in_turn(item: MediaInput) -> MediaInput:
    if not needs_scaling(item):
        return item
    with _ONE_AT_A_TIME:
        return scaled_down(item)


def needs_scaling(item: MediaInput) -> bool:
    return item.kind == "image" and item.width * item.height > MAX_DECODED_PIXELS


def check_scalable(item: MediaInput) -> None:
    """ScalingError, from the headers alone, when `item` needs scaling and cannot have it:
    too many pixels, or a format or layout that cannot be decoded a strip at a time."""
    if not needs_scaling(item):
        return
    size = f"{item.width}\u00d7{item.height} pixels"
    if item.width * item.height > MAX_SCALED_PIXELS:
        raise ScalingError(
            f"the image is {size}; at most {MAX_SCALED_PIXELS // 1_000_000} megapixels are "
            "taken: scale it down first"
        )
    if item.mime == "image/png":
        _png_header(item.data)
    elif item.mime == "image/jpeg":
        _jpeg_opened(item.data, size)
    else:
        raise ScalingError(
            f"the image is {size}, and a {_name(item)} that large cannot be scaled down here: "
            f"send it as a PNG or JPEG, or at most {MAX_DECODED_PIXELS // 1_000_000} megapixels"
        )


def scaled_down(item: MediaInput, longest_side: int = SCALED_LONGEST_SIDE) -> MediaInput:
    """`item` as a PNG at most `longest_side` pixels a side, decoded with bounded memory;
    ScalingError when it cannot be (see the module's docstring and `check_scalable`)."""
    factor = math.ceil(max(item.width, item.height) / longest_side)
    if item.mime == "image/png":
        pixels = _png_scaled(item.data, factor)
    elif item.mime == "image/jpeg":
        pixels = _jpeg_scaled(item.data, item.width, item.height, longest_side)
    else:
        check_scalable(item)
        raise ScalingError(f"a {_name(item)} cannot be scaled down here")
    output = io.BytesIO()
    pixels.save(output, format="PNG", compress_level=1)
    return replace(
        item, data=output.getvalue(), mime="image/png", width=pixels.width, height=pixels.height
    )


def _name(item: MediaInput) -> str:
    return item.mime.removeprefix("image/").upper() or "file"


def _jpeg_opened(data: bytes, size: str) -> Image.Image:
    """The JPEG, its headers read (no pixel yet); ScalingError for a progressive one."""
    try:
        image = Image.open(io.BytesIO(data), formats=["JPEG"])
    except (OSError, ValueError) as exc:
        raise ScalingError(f"the JPEG image could not be read: {exc}") from None
    if image.info.get("progressive") or image.info.get("progression"):
        raise ScalingError(
            f"the image is a progressive JPEG of {size}, which cannot be decoded without "
            "holding all of it: save it as a baseline JPEG or a PNG, or scale it down first"
        )
    return image


def _jpeg_scaled(data: bytes, width: int, height: int, longest_side: int) -> Image.Image:
    image = _jpeg_opened(data, f"{width}\u00d7{height} pixels")
    scale = longest_side / max(width, height)
    fitted = max(1, round(width * scale)), max(1, round(height * scale))
    # libjpeg decodes at the smallest of 1/1, 1/2, 1/4, 1/8 that is still at least this big.
    image.draft("RGB", fitted)
    try:
        image = image.convert("RGB")
    except (OSError, ValueError) as exc:
        raise ScalingError(f"the JPEG image could not be decoded: {exc}") from None
    image.thumbnail((longest_side, longest_side), Image.Resampling.BOX)
    return image


@dataclass(frozen=True)
class _PngHeader:
    width: int
    height: int
    depth: int  # bits per sample: 1, 2, 4 or 8
    colour: int  # PNG's colour type
    row_bytes: int  # one filtered row's bytes, without its filter byte
    palette: bytes | None  # PLTE's RGB triples, for colour type 3


def _png_scaled(data: bytes, factor: int) -> Image.Image:
    """The PNG averaged over `factor` x `factor` blocks (Pillow's `reduce`), a strip of rows
    at a time: a whole number of blocks high, so no block straddles two strips."""
    header = _png_header(data)
    size = (math.ceil(header.width / factor), math.ceil(header.height / factor))
    result = Image.new("RGB", size)
    rows_per_strip = max(1, STRIP_BYTES // (header.row_bytes + 1) // factor) * factor
    previous = bytes(header.row_bytes)  # PNG's row above the first: zeros
    top = 0
    for strip in _filtered_strips(data, header, rows_per_strip):
        pixels, previous = _unfiltered(strip, previous, header)
        result.paste(pixels.reduce(factor), (0, top // factor))
        top += pixels.height
    return result


def _png_header(data: bytes) -> _PngHeader:
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    if interlace:
        raise ScalingError(
            f"the image is an interlaced PNG of {width}\u00d7{height} pixels, which cannot be "
            "decoded a strip at a time: save it without interlacing, or scale it down first"
        )
    if (
        colour not in _PNG_MODES
        or depth not in (1, 2, 4, 8)
        or (depth < 8 and colour not in (0, 3))
    ):
        raise ScalingError(
            f"the image is a PNG of {width}\u00d7{height} pixels with {depth}-bit samples "
            f"(colour type {colour}), which cannot be scaled down here: send it with 8-bit "
            "samples, or scale it down first"
        )
    palette = None
    if colour == 3:
        found = _chunk(data, b"PLTE")
        if found is None or len(found) % 3:
            raise ScalingError("the PNG has a palette colour type but no valid palette")
        palette = found
    row_bytes = math.ceil(width * depth * _PNG_SAMPLES[colour] / 8)
    return _PngHeader(width, height, depth, colour, row_bytes, palette)


def _chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    position = 8
    while position + 8 <= len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        yield kind, data[position + 8 : position + 8 + length]
        position += 12 + length


def _chunk(data: bytes, wanted: bytes) -> bytes | None:
    return next((body for kind, body in _chunks(data) if kind == wanted), None)


def _filtered_strips(data: bytes, header: _PngHeader, rows: int) -> Iterator[bytes]:
    try:
        yield from _inflated_strips(data, header, rows)
    except zlib.error as exc:
        raise ScalingError(f"the PNG's image data could not be inflated: {exc}") from None


def _inflated_strips(data: bytes, header: _PngHeader, rows: int) -> Iterator[bytes]:
    """The image's filtered rows (each behind its filter byte), `rows` at a time, inflated
    from the IDAT chunks as needed: never more than a strip of them at once."""
    inflater = zlib.decompressobj()
    strip_bytes = rows * (header.row_bytes + 1)
    total = header.height * (header.row_bytes + 1)
    pending = b""
    produced = 0
    for kind, body in _chunks(data):
        if kind != b"IDAT":
            continue
        chunk = body
        while chunk or len(pending) >= strip_bytes:
            pending += inflater.decompress(chunk, strip_bytes - len(pending) or 1)
            chunk = inflater.unconsumed_tail
            if len(pending) >= strip_bytes:
                produced += strip_bytes
                yield pending[:strip_bytes]
                pending = pending[strip_bytes:]
                if produced >= total:  # anything after the last row is not the image's
                    return
            elif not chunk:
                break
    pending += inflater.flush()
    if produced + len(pending) < total:
        raise ScalingError("the PNG's image data ends before its last row")
    while pending and produced < total:
        size = min(strip_bytes, total - produced)
        produced += size
        yield pending[:size]
        pending = pending[size:]


def _unfiltered(strip: bytes, previous: bytes, header: _PngHeader) -> tuple[Image.Image, bytes]:
    """The strip as an RGB image, and its last row's unfiltered bytes (the next strip's row
    above). Pillow's PNG decoder does the unfiltering, handed a PNG stream of the previous
    row (filter 0, "none") and then the strip's own rows. Rows of 1, 2 or 4-bit samples are
    unfiltered as bytes (PNG filters them a byte at a time), then unpacked. RGB as stb_image
    hands llama.cpp any PNG: alpha dropped, grey spread, the palette looked up."""
    rows = len(strip) // (header.row_bytes + 1)
    stream = zlib.compress(b"\0" + previous + strip, 0)
    packed = header.depth < 8
    mode = "L" if packed else _PNG_MODES[header.colour]
    size = (header.row_bytes if packed else header.width, rows + 1)
    try:
        image = Image.frombytes(mode, size, stream, "zip", mode)
    except (OSError, ValueError) as exc:
        raise ScalingError(f"the PNG's image data could not be decoded: {exc}") from None
    last = image.crop((0, rows, size[0], rows + 1)).tobytes()
    image = image.crop((0, 1, size[0], rows + 1))
    if packed:
        values = _unpacked(np.asarray(image), header)
        mode = "P" if header.colour == 3 else "L"
        image = Image.frombytes(mode, (header.width, rows), values.tobytes())
    if header.palette is not None:
        image.putpalette(header.palette)
    return image.convert("RGB"), last


def _unpacked(packed: np.ndarray, header: _PngHeader) -> np.ndarray:
    """Rows of 1, 2 or 4-bit samples as one byte each (grey spread over 0-255)."""
    depth = header.depth
    bits = np.unpackbits(packed, axis=1)
    per_row = bits.shape[1] // depth
    weights = (1 << np.arange(depth - 1, -1, -1)).astype(np.uint8)
    samples = bits[:, : per_row * depth].reshape(len(packed), per_row, depth) * weights
    values: np.ndarray = samples.sum(axis=2, dtype=np.uint16)[:, : header.width]
    if header.colour == 0:
        values = values * 255 // ((1 << depth) - 1)
    return values.astype(np.uint8)
