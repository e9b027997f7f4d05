"""Images too large to decode whole (server/dialects/media/image_scaling.py): a PNG decoded a strip
of rows at a time gives exactly what decoding it whole and averaging gives, for every colour
type and bit depth it takes; a baseline JPEG is decoded at a fraction of its size; and what
cannot be scaled so is refused from its headers, before a pixel is decoded. The 20000 x 20000
image through the real server is in tests/server/dialects/test_vision_real.py."""

from __future__ import annotations

import io
import subprocess
import sys
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image

from server.core.types import MediaInput
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.media import image_scaling
from server.dialects.media.media import check_media
from tests.support import media_bytes as mb


def pattern(width: int, height: int) -> np.ndarray:
    """Bytes that make PNG's encoder pick every filter somewhere (gradients plus noise)."""
    y, x = np.mgrid[0:height, 0:width]
    noise = np.random.default_rng(7).integers(0, 8, (height, width))
    return ((x * 7 + y * 3) % 256 ^ noise).astype(np.uint8)


def png_of(mode: str, width: int, height: int, bits: int | None = None) -> bytes:
    base = pattern(width, height)
    planes = [base, base[::-1], base * 3, base // 2]
    if mode in ("RGB", "RGBA", "LA"):
        image = Image.merge(mode, [Image.fromarray(p) for p in planes[: len(mode)]])
    else:
        image = Image.fromarray(base).convert(mode)
    output = io.BytesIO()
    image.save(output, format="PNG", optimize=True, **({"bits": bits} if bits else {}))
    return output.getvalue()


@pytest.mark.parametrize(
    ("mode", "bits"),
    [
        *[(mode, None) for mode in ("RGB", "L", "LA", "RGBA", "P", "1")],
        *[("P", bits) for bits in (4, 2, 1)],
    ],
)
def test_a_png_scaled_a_strip_at_a_time_equals_one_decoded_whole(
    mode: str, bits: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Strips of a few rows, so each strip's filters lean on the row above from the last one.
    monkeypatch.setattr(image_scaling, "STRIP_BYTES", 3000)
    width, height = 301, 207
    data = png_of(mode, width, height, bits)
    item = MediaInput("image", data, "image/png", width, height)
    scaled = image_scaling.scaled_down(item, longest_side=76)
    whole = Image.open(io.BytesIO(data)).convert("RGB").reduce(4)
    got = Image.open(io.BytesIO(scaled.data))
    assert (scaled.width, scaled.height) == got.size == whole.size == (76, 52)
    assert np.array_equal(np.asarray(got), np.asarray(whole))


# Run in a process of its own, whose peak memory (ru_maxrss, KB) is the decoder's too.
SCALE_A_JPEG = """
import io, resource, sys
from PIL import Image
from server.dialects.media.image_scaling import scaled_down
from server.dialects.media.media import check_media
from server.dialects.edge.errors import Dialect
from tests.support.media_bytes import jpeg_bytes
item = check_media(jpeg_bytes(20000, 20000), Dialect.OPENAI, expect="image")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
picture = Image.open(io.BytesIO(scaled_down(item).data))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(picture.size, picture.convert("L").getextrema(), (after - before) * 1024)
"""


def test_a_baseline_jpeg_is_decoded_at_a_fraction_of_its_size() -> None:
    """A 20000 x 20000 JPEG (mid-grey, 1.5 MB): 400 MB of greys decoded whole; decoded at
    an eighth of its size, the process grows by a small part of that (whole, measured: 2 GB
    with the RGB copy)."""
    ran = subprocess.run(
        [sys.executable, "-c", SCALE_A_JPEG], capture_output=True, text=True, check=True
    )
    grown = int(ran.stdout.split()[-1])
    assert ran.stdout.startswith("(2048, 2048) (128, 128)"), ran.stdout
    assert grown < 20000 * 20000 // 4, f"grew by {grown:,} bytes"  # whole: 5 times that


def test_a_png_whose_image_data_is_damaged_or_short_is_refused() -> None:
    whole = mb.huge_png(3000, 2000, (10, 200, 10))
    start = whole.index(b"IDAT") + 4
    damaged = whole[: start + 40] + b"\xff" * 64 + whole[start + 104 :]
    short = mb.huge_png(3000, 1000, (10, 200, 10)).replace(
        (1000).to_bytes(4, "big"), (2000).to_bytes(4, "big"), 1
    )
    for data, says in ((damaged, "could not be inflated"), (short, "ends before its last row")):
        item = MediaInput("image", data, "image/png", 3000, 2000)
        with pytest.raises(image_scaling.ScalingError, match=says):
            image_scaling.scaled_down(item, longest_side=100)


def refusal(check: Callable[[], object]) -> str:
    with pytest.raises(APIError) as caught:
        check()
    assert caught.value.status == 400
    return caught.value.message


def interlaced_png_header(width: int, height: int) -> bytes:
    ihdr = mb.struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 1)
    png = b"\x89PNG\r\n\x1a\n" + mb.png_chunk(b"IHDR", ihdr)
    return png + mb.png_chunk(b"IDAT", b"x") + mb.png_chunk(b"IEND", b"")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (mb.gif_header_only(20000, 20000), "a GIF that large cannot be scaled down here"),
        (
            mb.bmp_bytes(1, 1)[:18]
            + (20000).to_bytes(4, "little")
            + (-20000).to_bytes(4, "little", signed=True)
            + mb.bmp_bytes(1, 1)[26:],
            "a BMP that large cannot be scaled down here",
        ),
        (mb.png_header_only(20001, 20000), "at most 400 megapixels are taken"),
        (interlaced_png_header(20000, 20000), "interlaced PNG"),
        (
            mb.jpeg_bytes(20000, 20000, frame_marker=0xC2, scan=b"\x00"),
            "progressive JPEG of 20000\u00d720000 pixels",
        ),
    ],
    ids=["gif", "bmp", "over-400-megapixels", "interlaced-png", "progressive-jpeg"],
)
def test_what_cannot_be_scaled_is_refused_from_its_headers(raw: bytes, says: str) -> None:
    tracemalloc.start()
    try:
        message = refusal(lambda: check_media(raw, Dialect.OPENAI, expect="image"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert says in message, message
    assert peak < 1024 * 1024
