"""Media checked at the edge (server/dialects/media/media.py): real files built byte by byte
(tests/support/media_bytes.py) are taken with their kind, type and size; bad ones (not base64,
remote URLs, truncated, too many pixels, the wrong kind, unsupported formats, too many or too
large) are a one-line 400 in the dialect's shape, naming the item's place; and no bytes at all,
random or cut short, raise anything else. No model: llama.cpp's image decoder is only used to
confirm that what is taken decodes at the size read from its header."""

from __future__ import annotations

import base64
import ctypes
import random
from collections.abc import Callable

import pytest

from server.core.types import MediaInput
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.media import media
from server.dialects.media.media import (
    MAX_MEDIA_PER_REQUEST,
    REMOTE_URL_MESSAGE,
    check_media,
    check_media_count,
    media_from_base64,
    media_from_url,
)
from tests.support import media_bytes as mb
from tests.support.error_shapes import shape_problem

OPENAI = Dialect.OPENAI
TIMES = "\u00d7"  # the multiplication sign the messages use
IMAGES = {
    "png": (mb.png_bytes(5, 3), "image/png", (5, 3)),
    "jpeg": (mb.jpeg_bytes(17, 9), "image/jpeg", (17, 9)),
    "jpeg-progressive": (mb.jpeg_bytes(9, 8, frame_marker=0xC2), "image/jpeg", (9, 8)),
    "jpeg-file": (mb.FIXTURE_JPEG.read_bytes(), "image/jpeg", (16, 16)),
    "gif": (mb.gif_bytes(5, 3), "image/gif", (5, 3)),
    "bmp": (mb.bmp_bytes(5, 3), "image/bmp", (5, 3)),
    "bmp-top-down": (mb.bmp_bytes(5, 3, top_down=True), "image/bmp", (5, 3)),
}
SOUNDS = {
    "wav": (mb.wav_bytes(), "audio/wav"),
    "mp3": (mb.mp3_bytes(), "audio/mpeg"),
    "mp3-id3": (mb.mp3_bytes(id3=True), "audio/mpeg"),
    "flac": (mb.flac_bytes(), "audio/flac"),
}


def refusal(call: Callable[[], object]) -> str:
    """The message of the 400 `call` raises (its body is checked to be OpenAI's shape)."""
    with pytest.raises(APIError) as caught:
        call()
    assert caught.value.status == 400
    assert shape_problem("openai", caught.value.body) is None
    assert "\n" not in caught.value.message
    return caught.value.message


def size_of(raw: bytes) -> tuple[int, int]:
    item = check_media(raw, OPENAI, expect="image")
    return item.width, item.height


def data_uri(raw: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(raw).decode()}"


@pytest.mark.parametrize("name", IMAGES)
def test_each_image_format_is_taken_with_its_type_and_size(name: str) -> None:
    raw, mime, (width, height) = IMAGES[name]
    assert check_media(raw, OPENAI, expect="image") == MediaInput("image", raw, mime, width, height)
    assert media_from_url(data_uri(raw, mime), OPENAI).data == raw
    assert media_from_base64(base64.b64encode(raw).decode(), OPENAI).mime == mime


@pytest.mark.parametrize("name", SOUNDS)
def test_each_audio_format_is_taken_with_its_type(name: str) -> None:
    raw, mime = SOUNDS[name]
    encoded = base64.b64encode(raw).decode()
    taken = media_from_base64(encoded, OPENAI, expect="audio", declared="wav")
    assert taken == MediaInput("audio", raw, mime)
    assert check_media(raw, OPENAI, expect="any").kind == "audio"


def test_llama_cpps_decoder_reads_what_is_taken_at_the_size_its_header_gives() -> None:
    """The images above are real: stb_image (through llama.cpp's multimodal helper, which
    needs no projector for an image) decodes each at the width and height read here."""
    from llama_cpp import mtmd_cpp

    for name, (raw, _mime, size) in IMAGES.items():
        buffer = (ctypes.c_uint8 * len(raw)).from_buffer_copy(raw)
        bitmap = mtmd_cpp.mtmd_helper_bitmap_init_from_buf(None, buffer, len(raw), True)
        assert bitmap, f"{name} does not decode"
        decoded = (mtmd_cpp.mtmd_bitmap_get_nx(bitmap), mtmd_cpp.mtmd_bitmap_get_ny(bitmap))
        mtmd_cpp.mtmd_bitmap_free(bitmap)
        assert decoded == size == size_of(raw), name


def test_a_jpeg_s_size_comes_from_its_frame_walking_past_other_segments() -> None:
    # An EXIF-like APP1 holding a fake frame header, fill bytes and a standalone marker.
    fake_frame = b"\xff\xc0\x00\x0b\x08\x4e\x20\x4e\x20\x01\x01\x11\x00"
    before = mb.jpeg_segment(0xE1, b"Exif\x00\x00" + fake_frame) + b"\xff\xff\xff\x01"
    raw = mb.jpeg_bytes(24, 10, before_frame=before + mb.jpeg_segment(0xFE, b"a comment"))
    assert size_of(raw) == (24, 10)
    # Zero padding after the end marker is an encoder's, not a truncation.
    assert check_media(raw + bytes(7), OPENAI, expect="image").width == 24


def test_jpegs_stb_image_cannot_read_are_refused_by_their_frame_type() -> None:
    lossless = mb.jpeg_bytes(8, 8, frame_marker=0xC3)
    message = refusal(lambda: check_media(lossless, OPENAI, expect="image"))
    assert message == (
        "Lossless and arithmetic-coded JPEGs are not supported: send a baseline or progressive JPEG"
    )


def test_base64_with_line_breaks_urlsafe_or_without_padding_is_taken() -> None:
    raw = mb.png_bytes(4, 4)
    encoded = base64.b64encode(raw).decode()
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    assert media_from_base64(f"  {wrapped}\r\n", OPENAI).data == raw
    urlsafe = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert media_from_base64(urlsafe, OPENAI).data == raw


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("iVBORw0KGgo!AAAA", "(it has '!')"),
        ("iVBORw0KGgoé", "(it has 'é')"),
        ("iVBORw0KG", "(its length, 9, cannot be decoded)"),
        ("AAAA==AAAA", "(it has '=' before its end)"),
    ],
)
def test_invalid_base64_is_refused_naming_the_item(data: str, reason: str) -> None:
    message = refusal(lambda: media_from_base64(data, OPENAI, where="messages[1].content[0]"))
    assert message == f"messages[1].content[0]: the image is not valid base64 {reason}"


def test_data_uri_variants_are_taken() -> None:
    raw = mb.gif_bytes()
    encoded = base64.b64encode(raw).decode()
    for uri in (
        f"data:image/gif;base64,{encoded}",
        f"DATA:IMAGE/GIF;BASE64,{encoded}",
        f"data:;base64,{encoded}",
        f"data:image/gif;name=dot.gif;base64,{encoded}",
        f"data:image/gif;base64,{encoded.replace('+', '%2B').replace('=', '%3D')}",
        f" data:image/png;base64,{encoded}\n",  # mislabelled: the bytes are what counts
    ):
        assert media_from_url(uri, OPENAI) == check_media(raw, OPENAI, expect="image"), uri
        # KoboldCpp's `images` take a data: URI as well as bare base64.
        assert media_from_base64(uri, Dialect.KOBOLD).mime == "image/gif", uri


def test_data_uris_that_are_not_base64_are_refused() -> None:
    message = refusal(lambda: media_from_url("data:image/svg+xml,<svg/>", OPENAI, where="p"))
    assert message == "p: the data: URI is not base64-encoded: send data:<type>;base64,<data>"
    message = refusal(lambda: media_from_url("data:image/png;base64", OPENAI))
    assert message == "The data: URI has no comma before its data"


def test_remote_urls_are_refused_not_fetched() -> None:
    for url in ("http://169.254.169.254/latest", "HTTPS://example.com/cat.png"):
        message = refusal(lambda url=url: media_from_url(url, OPENAI, where="messages[0]"))
        assert message == f"messages[0]: {REMOTE_URL_MESSAGE}"
        # An Ollama or Anthropic client pasting a URL into a base64 field hears the same.
        assert refusal(lambda url=url: media_from_base64(url, OPENAI)).startswith("Remote")
    message = refusal(lambda: media_from_url("file:///etc/passwd", OPENAI))
    assert message == (
        "The URL 'file:///etc/passwd' is not a data: URI: send data:image/png;base64,<data>"
    )


@pytest.mark.parametrize(
    ("raw", "how"),
    [
        (mb.png_bytes(5, 3)[:-12], "PNG without its IEND end chunk"),
        (mb.png_bytes(5, 3)[:-20], "PNG whose data runs past the end"),
        (mb.png_bytes(5, 3)[:30], "PNG whose header runs past the end"),
        (mb.jpeg_bytes(16, 16)[:-3], "JPEG without its end marker"),
        (mb.jpeg_bytes(16, 16)[:100], "JPEG whose header runs past the end"),
        (mb.gif_bytes(5, 3)[:-1], "GIF without its trailer"),
        (mb.bmp_bytes(5, 3)[:-4], "BMP whose header says 102 bytes"),
    ],
    ids=["png-iend", "png-data", "png-header", "jpeg-eoi", "jpeg-header", "gif", "bmp"],
)
def test_truncated_images_are_refused(raw: bytes, how: str) -> None:
    got = refusal(lambda: check_media(raw, OPENAI, expect="image", where="images[2]"))
    assert got == f"images[2]: image is truncated ({len(raw)} bytes of a {how})"


def test_a_bmp_without_a_file_size_is_still_checked_by_its_rows() -> None:
    whole = mb.bmp_bytes(5, 3)
    unsized = whole[:2] + bytes(4) + whole[6:]
    assert check_media(unsized, OPENAI, expect="image").height == 3
    message = refusal(lambda: check_media(unsized[:-20], OPENAI, expect="image"))
    assert message == "Image is truncated (82 bytes of a BMP whose pixels need 101 bytes)"


def test_pngs_without_pixels_or_with_a_bad_header_are_refused() -> None:
    message = refusal(lambda: check_media(mb.png_header_only(4, 4), OPENAI, expect="image"))
    assert message == "The PNG has no image data (no IDAT chunk)"
    bad_depth = mb.png_bytes(4, 4, depth=7, colour=2)
    message = refusal(lambda: check_media(bad_depth, OPENAI, expect="image"))
    assert message == "The PNG header cannot be read (bit depth 7 with colour type 2)"


def test_a_large_png_without_its_image_data_is_refused_from_its_structure() -> None:
    """A few dozen bytes that claim 20000 x 20000: taken to be scaled down
    (server/dialects/media/image_scaling.py) only once the file is whole; what cannot be scaled is
    refused from its headers (tests/server/dialects/media/test_image_scaling.py)."""
    message = refusal(lambda: check_media(mb.png_header_only(20000, 20000), OPENAI, expect="image"))
    assert message == "The PNG has no image data (no IDAT chunk)"


def test_the_pixel_limit_is_the_product_of_width_and_height() -> None:
    wide = mb.gif_header_only(50_001, 1000)  # a GIF that large cannot be scaled down
    assert f"50001{TIMES}1000 pixels" in refusal(lambda: check_media(wide, OPENAI, expect="image"))
    assert check_media(mb.gif_bytes(300, 2), OPENAI, expect="image").width == 300


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        (mb.png_header_only(0, 5), (0, 5)),
        (mb.gif_header_only(0, 0), (0, 0)),
        (mb.jpeg_bytes(8, 0, scan=b"\x00"), (8, 0)),
        (mb.bmp_bytes(0, 3), (0, 3)),
    ],
)
def test_images_of_zero_size_are_refused(raw: bytes, size: tuple[int, int]) -> None:
    message = refusal(lambda: check_media(raw, OPENAI, expect="image"))
    width, height = size
    assert message.startswith("The ") and message.endswith(
        f"image has no pixels ({width}{TIMES}{height})"
    )


ID3_TAG = b"ID3\x04\x00\x00\x00\x00\x00\x0a" + bytes(10)  # ID3v2.4, ten bytes of padding
MPEG1_FRAME = mb.mp3_bytes()[:417]  # Layer III, 128 kbit/s, 44.1 kHz: 417 bytes
MPEG2_FRAME = b"\xff\xf3\x80\xc4".ljust(208, b"\x00")  # Layer III, 64 kbit/s, 22.05 kHz


@pytest.mark.parametrize(
    "raw",
    [
        ID3_TAG + bytes(300) + MPEG1_FRAME * 2,  # zeros after the tag, as some taggers leave
        ID3_TAG[:5] + b"\x10" + ID3_TAG[6:] + b"3DI" + bytes(7) + MPEG1_FRAME * 2,  # a footer
        ID3_TAG + ID3_TAG + MPEG1_FRAME * 2,  # two tags
        MPEG1_FRAME,  # one frame alone
        MPEG2_FRAME * 3,  # MPEG-2: 72 * bitrate / rate
        MPEG1_FRAME + MPEG1_FRAME[:1] + b"\xfa" + MPEG1_FRAME[2:],  # the second with a CRC
    ],
    ids=["zeros-after-tag", "tag-footer", "two-tags", "one-frame", "mpeg2", "crc"],
)
def test_mp3s_with_frames_where_their_headers_say_are_taken(raw: bytes) -> None:
    assert check_media(raw, OPENAI, expect="audio").mime == "audio/mpeg"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (ID3_TAG + bytes(2000), "The MP3 has no audio frames"),
        (ID3_TAG, "The MP3 has no audio frames"),
        (ID3_TAG[:6] + b"\x00\x00\x10\x00" + MPEG1_FRAME * 2, "The MP3 has no audio frames"),
        (ID3_TAG[:6] + b"\x80" + ID3_TAG[7:] + MPEG1_FRAME, "The MP3 header cannot be read"),
        (ID3_TAG + b"junk" * 200, "MP3 has no audio frame where its first should be (byte 20)"),
        (ID3_TAG + b"\xff\xfb\xf0\x64" + bytes(900), "no audio frame where its first should be"),
        (ID3_TAG + MPEG1_FRAME + bytes(417), "first audio frame is not followed by another"),
        (MPEG1_FRAME + MPEG2_FRAME * 2, "MP3's first audio frame is not followed by another"),
        (ID3_TAG + MPEG1_FRAME[:300], "Audio is truncated (320 bytes of an MP3 whose first"),
    ],
    ids=[
        "tag-then-zeros", "tag-only", "tag-past-the-end", "tag-size-not-syncsafe", "junk",
        "bad-bitrate", "no-second", "second-of-another-stream", "cut",
    ],
)  # fmt: skip
def test_mp3s_without_frames_where_their_headers_say_are_refused(raw: bytes, message: str) -> None:
    """minimp3 (llama.cpp's decoder) finds nothing to decode in these, inside the engine."""
    assert message in refusal(lambda: check_media(raw, OPENAI, expect="audio"))


def test_flacs_without_a_stream_s_facts_or_frames_are_refused() -> None:
    flac = mb.flac_bytes()
    info, frame = flac[:42], flac[42:]

    def refused(raw: bytes) -> str:
        return refusal(lambda: check_media(raw, OPENAI, expect="audio"))

    zeroed = info[:8] + bytes(34)
    assert refused(zeroed + frame) == (
        "The FLAC header cannot be read (its STREAMINFO says 0 Hz, blocks of 0)"
    )
    comment = bytes([4, 0, 0, 8]) + b"\x00" * 8  # VORBIS_COMMENT first
    first_not_info = flac[:4] + comment + b"\x80" + info[5:] + frame
    assert refused(first_not_info) == (
        "The FLAC header cannot be read (its first metadata block is not STREAMINFO)"
    )
    assert refused(info) == "The FLAC has no audio frames"
    assert (
        refused(info + b"\x00" * 11) == "The FLAC has no audio frame after its metadata (byte 42)"
    )
    not_last = info[:4] + b"\x00" + info[5:]  # says more metadata follows; none does
    assert refused(not_last + frame).startswith("Audio is truncated (53 bytes of a FLAC whose")
    assert refused(info[:30]) == (
        "Audio is truncated (30 bytes of a FLAC whose STREAMINFO runs past the end)"
    )
    # Other metadata blocks between STREAMINFO and the first frame are walked past.
    with_comment = flac[:4] + b"\x00" + info[5:] + b"\x84" + comment[1:] + frame
    assert check_media(with_comment, OPENAI, expect="audio").mime == "audio/flac"


def test_audio_where_an_image_is_expected_and_the_reverse_are_refused() -> None:
    wav, png = mb.wav_bytes(), mb.png_bytes()
    message = refusal(lambda: check_media(wav, OPENAI, expect="image", where="m[0]"))
    assert message == "m[0]: WAV audio was sent where an image (PNG, JPEG, GIF or BMP) is expected"
    message = refusal(lambda: check_media(png, OPENAI, expect="audio"))
    assert message == "A PNG image was sent where audio (WAV, MP3 or FLAC) is expected"
    assert check_media(png, OPENAI, expect="any").kind == "image"
    with pytest.raises(ValueError, match="expect must be"):
        check_media(png, OPENAI, expect="video")


def test_a_declared_type_is_trusted_only_as_far_as_its_kind() -> None:
    png, mp3 = mb.png_bytes(), mb.mp3_bytes()
    for label in ("image/jpeg", "image/webp", "application/octet-stream", "text/plain", ""):
        assert check_media(png, OPENAI, expect="image", declared=label).mime == "image/png"
    assert check_media(mp3, OPENAI, expect="audio", declared="wav").mime == "audio/mpeg"
    message = refusal(lambda: check_media(png, OPENAI, expect="image", declared="audio/wav"))
    assert message == "It is declared as 'audio/wav' but its bytes are a PNG image"
    message = refusal(lambda: media_from_base64(data_uri(mp3), OPENAI, expect="audio"))
    assert message == "It is declared as 'image/png' but its bytes are MP3 audio"
    # OpenAI's input_audio `format` names a kind too.
    message = refusal(lambda: check_media(png, OPENAI, expect="any", declared="mp3"))
    assert message == "It is declared as 'mp3' but its bytes are a PNG image"
    # What a client declares is quoted on one line, cut short.
    long_label = "audio/\n" * 9
    message = refusal(lambda: check_media(png, OPENAI, expect="image", declared=long_label))
    shown = repr(long_label[:40] + "…")
    assert message == f"It is declared as {shown} but its bytes are a PNG image"


@pytest.mark.parametrize(
    ("raw", "expect", "message"),
    [
        (mb.webp_bytes(), "image", "WebP images are not supported: send PNG, JPEG, GIF or BMP"),
        (
            mb.ftyp_bytes(b"heic"),
            "image",
            "HEIC images are not supported: send PNG, JPEG, GIF or BMP",
        ),
        (
            mb.ftyp_bytes(b"avif"),
            "image",
            "AVIF images are not supported: send PNG, JPEG, GIF or BMP",
        ),
        (mb.TIFF_BYTES, "image", "TIFF images are not supported: send PNG, JPEG, GIF or BMP"),
        (mb.SVG_BYTES, "image", "SVG images are not supported: send PNG, JPEG, GIF or BMP"),
        (mb.OGG_BYTES, "audio", "Ogg audio is not supported: send WAV, MP3 or FLAC"),
        (
            mb.ftyp_bytes(b"M4A "),
            "audio",
            "M4A (AAC) audio is not supported: send WAV, MP3 or FLAC",
        ),
        (
            mb.ftyp_bytes(b"isom"),
            "image",
            "MP4/QuickTime files are not supported: send an image (PNG, JPEG, GIF or BMP)",
        ),
        (
            b"hello, world, this is text",
            "image",
            "The data is not an image (PNG, JPEG, GIF or BMP)",
        ),
        (b"", "audio", "The data is empty: it is not audio (WAV, MP3 or FLAC)"),
        (b"ID3\x04", "audio", "The data is not audio (WAV, MP3 or FLAC)"),  # shorter than 12
    ],
)
def test_unsupported_and_unknown_formats_are_named(raw: bytes, expect: str, message: str) -> None:
    assert refusal(lambda: check_media(raw, OPENAI, expect=expect)) == message


def test_at_most_eight_items_in_a_request() -> None:
    item = check_media(mb.png_bytes(), OPENAI, expect="image")
    check_media_count([item] * MAX_MEDIA_PER_REQUEST, OPENAI)
    message = refusal(lambda: check_media_count([item] * (MAX_MEDIA_PER_REQUEST + 1), OPENAI))
    assert message == "A request takes at most 8 images or sounds; this one has 9."


def test_size_limits_per_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    png, wav = mb.png_bytes(5, 3), mb.wav_bytes()
    monkeypatch.setattr(media, "MAX_IMAGE_BYTES", len(png) - 1)
    monkeypatch.setattr(media, "MAX_AUDIO_BYTES", len(wav) - 1)
    message = refusal(lambda: check_media(png, OPENAI, expect="image", where="images[0]"))
    limit = f"at most {len(png) - 1} bytes are taken"
    assert message == f"images[0]: the image is {len(png)} bytes; {limit}"
    message = refusal(lambda: check_media(wav, OPENAI, expect="audio"))
    assert message == f"The audio is {len(wav)} bytes; at most {len(wav) - 1} bytes are taken"
    # Base64 is measured before it is decoded.
    message = refusal(lambda: media_from_base64(base64.b64encode(png).decode(), OPENAI))
    assert message == f"The image is {len(png)} bytes; at most {len(png) - 1} bytes are taken"
    monkeypatch.setattr(media, "MAX_IMAGE_BYTES", 20 * media.MB)
    assert check_media(png, OPENAI, expect="image").width == 5
    huge = f"The image is {21 * media.MB:,} bytes; at most 20 MB are taken"
    assert refusal(lambda: media_from_base64("A" * (28 * media.MB), OPENAI)) == huge


@pytest.mark.parametrize("dialect", list(Dialect))
def test_refusals_come_in_each_dialect_s_shape(dialect: Dialect) -> None:
    with pytest.raises(APIError) as caught:
        media_from_url("https://example.com/a.png", dialect, where="messages[0].content[1]")
    assert caught.value.status == 400
    assert shape_problem(dialect.value, caught.value.body) is None
    assert f"messages[0].content[1]: {REMOTE_URL_MESSAGE}" in str(caught.value.body)


def _contract(call: Callable[[], MediaInput]) -> MediaInput | None:
    """Either a well-formed item or a one-line 400: never another exception."""
    try:
        item = call()
    except APIError as exc:
        assert exc.status == 400 and exc.message and "\n" not in exc.message
        return None
    assert item.kind in ("image", "audio") and item.mime
    assert item.kind == "audio" or (item.width > 0 and item.height > 0)
    return item


def test_random_bytes_and_damaged_files_only_ever_give_a_400() -> None:
    rng = random.Random(28)
    magics = [b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF89a", b"BM", b"RIFF\0\0\0\0WAVE"]
    magics += [b"fLaC", b"ID3", b"\xff\xfb", b"RIFF\0\0\0\0WEBP", b"<svg", b""]
    for _ in range(300):
        raw = rng.choice(magics) + rng.randbytes(rng.randrange(0, 120))
        _contract(lambda raw=raw: check_media(raw, OPENAI, expect="any"))
        text = "".join(rng.choice("AZaz09+/=-_ \n%:,;é") for _ in range(rng.randrange(40)))
        _contract(lambda text=text: media_from_base64(text, OPENAI, expect="any"))
        _contract(lambda text=text: media_from_url("data:" + text, OPENAI, expect="any"))
    for prefix in magics + [bytes([byte]) for byte in range(256)]:
        for length in range(len(prefix) + 1):  # every magic cut short, every single byte
            _contract(lambda raw=prefix[:length]: check_media(raw, OPENAI, expect="any"))
    files = [raw for raw, _mime, _size in IMAGES.values()]
    for raw in files + [raw for raw, _mime in SOUNDS.values()]:
        for _ in range(40):
            cut = raw[: rng.randrange(len(raw))]
            taken = _contract(lambda cut=cut: check_media(cut, OPENAI, expect="any"))
            assert taken is None or raw not in files, f"a truncated image was taken: {cut!r}"
            damaged = bytearray(raw)
            for _ in range(rng.randrange(1, 5)):
                damaged[rng.randrange(len(raw))] = rng.randrange(256)
            _contract(lambda damaged=damaged: check_media(bytes(damaged), OPENAI, expect="any"))
