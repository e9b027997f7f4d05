"""Every image and sound a client sends, checked and decoded at the edge, in pure Python.

llama.cpp's multimodal library takes whatever bytes it is handed: its image decoder
(stb_image) decodes a whole image before anything resizes it (a 290-KB GIF of 20000 by 20000
pixels takes 2.3 GB), and bytes it cannot read as an image or a sound go on to ffprobe, as a
video. So each item is read here first, without decoding a pixel: its format from its bytes,
not from what the client calls it (clients often mislabel); an image's size from its header;
an image's completeness from its structure (server/dialects/media/media_headers.py), a sound's
frames or samples from its (sound_headers.py).
Anything else is a 400 in the dialect's own shape, one line that names the item's place in
the request.

The dialect adapters call `media_from_url` (OpenAI's `image_url`), `media_from_base64` (every
other wire: Anthropic's `source.data`, Ollama's and KoboldAI's `images`, OpenAI's
`input_audio`, llama-server's `multimodal_data`) and `check_media_count`. `expect` is what the
field takes: "image", "audio", or "any" (llama-server's `multimodal_data`).
"""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from collections.abc import Sized

from server.core.types import MediaInput
from server.dialects.edge.errors import APIError, Dialect, ErrorKind
from server.dialects.media.image_scaling import ScalingError, check_scalable
from server.dialects.media.media_headers import (
    Format,
    MediaFormatError,
    check_complete,
    image_size,
    sniff,
    unsupported,
)
from server.dialects.media.sound_headers import check_sound

MB = 1024 * 1024
# KoboldCpp's cap on images per request.
MAX_MEDIA_PER_REQUEST = 8
# OpenAI's limit per image; audio a little more (OpenAI's for a transcription upload).
MAX_IMAGE_BYTES = 20 * MB
MAX_AUDIO_BYTES = 25 * MB

# Said when a URL reaches an adapter: --remoteimages is off, or the URL is in a field it does
# not fetch for (server/dialects/media/remote_media.py fetches allowed ones before planning).
REMOTE_URL_MESSAGE = (
    "remote image URLs are not fetched by this server (send the image as a data: URI, or "
    "start the server with --remoteimages HOST to fetch image URLs from HOST)"
)
_FORMATS = {"image": "PNG, JPEG, GIF or BMP", "audio": "WAV, MP3 or FLAC"}
_NOUNS = {
    "image": "an image (PNG, JPEG, GIF or BMP)",
    "audio": "audio (WAV, MP3 or FLAC)",
    "any": "an image (PNG, JPEG, GIF or BMP) or audio (WAV, MP3 or FLAC)",
}
_TIMES = "\u00d7"  # the multiplication sign, in sizes said to the client
_ITEM = {"image": "image", "audio": "audio", "any": "media item"}
_WHITESPACE = b" \t\r\n\v\f"
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/=_-]")
_URLSAFE = bytes.maketrans(b"-_", b"+/")
# OpenAI's `input_audio.format` and other bare names a client may declare.
_AUDIO_WORDS = frozenset({"wav", "mp3", "flac", "ogg", "opus", "aac", "m4a", "pcm16", "mpeg"})
_IMAGE_WORDS = frozenset({"png", "jpeg", "jpg", "gif", "bmp", "webp", "heic", "avif", "tiff"})


def media_from_url(
    url: str, dialect: Dialect, *, expect: str = "image", where: str = ""
) -> MediaInput:
    """OpenAI's `image_url.url`: a `data:<mime>;base64,<data>` URI. Remote URLs are refused,
    never fetched here: a server that fetches what a client names can be made to reach the
    machine's private network. With --remoteimages, the allowed ones were fetched into data:
    URIs before planning (server/dialects/media/remote_media.py)."""
    text = url.strip()
    scheme = text.partition(":")[0].lower()
    if scheme == "data":
        raw, mime = _decode_data_uri(text, dialect, expect, where)
        return check_media(raw, dialect, expect=expect, declared=mime or None, where=where)
    if scheme in ("http", "https"):
        raise _refuse(dialect, where, REMOTE_URL_MESSAGE)
    message = f"the URL {_shown(text)} is not a data: URI: send data:image/png;base64,<data>"
    raise _refuse(dialect, where, message)


def media_from_base64(
    data: str,
    dialect: Dialect,
    *,
    expect: str = "image",
    declared: str | None = None,
    where: str = "",
) -> MediaInput:
    """A base64 field (whitespace and line breaks in it are fine, base64url too). A data: URI
    is taken as well, as KoboldCpp takes one in `images`; its type is the declared one unless
    `declared` is given (Anthropic's `media_type`, OpenAI's audio `format`)."""
    text = data.strip()
    head = text[:8].lower()
    if head.startswith("data:"):
        raw, mime = _decode_data_uri(text, dialect, expect, where)
        declared = declared or mime or None
    elif head.startswith(("http://", "https://")):
        raise _refuse(dialect, where, REMOTE_URL_MESSAGE)
    else:
        raw = _decode_base64(text, dialect, expect, where)
    return check_media(raw, dialect, expect=expect, declared=declared, where=where)


def check_media(
    raw: bytes, dialect: Dialect, *, expect: str, declared: str | None = None, where: str = ""
) -> MediaInput:
    """The item `raw` is, checked: a format taken, the kind the field expects, within the size
    limits, a sound with samples to read, and an image's header readable, its size bounded and
    its file complete. A declared type is trusted only as far as its kind: a mislabelled PNG is
    still a PNG, but audio declared for an image's bytes is refused."""
    if expect not in _NOUNS:
        raise ValueError(f"expect must be 'image', 'audio' or 'any', not {expect!r}")
    fmt = sniff(raw)
    if fmt is None:
        raise _refuse(dialect, where, _not_media(raw, expect))
    declared_kind = _declared_kind(declared)
    if declared_kind is not None and declared_kind != fmt.kind:
        message = f"it is declared as {_shown(declared or '')} but its bytes are {fmt.described}"
        raise _refuse(dialect, where, message)
    if expect != "any" and fmt.kind != expect:
        message = f"{fmt.described} was sent where {_NOUNS[expect]} is expected"
        raise _refuse(dialect, where, message)
    limit = MAX_IMAGE_BYTES if fmt.kind == "image" else MAX_AUDIO_BYTES
    if len(raw) > limit:
        raise _refuse(dialect, where, _too_large(fmt.kind, len(raw), limit))
    if fmt.kind == "audio":
        try:
            check_sound(raw, fmt)
        except MediaFormatError as exc:
            raise _refuse(dialect, where, str(exc)) from None
        return MediaInput("audio", raw, fmt.mime)
    width, height = _checked_image(raw, fmt, dialect, where)
    return MediaInput("image", raw, fmt.mime, width, height)


def check_media_count(items: Sized, dialect: Dialect) -> None:
    """At most MAX_MEDIA_PER_REQUEST items in one request. `items` may be the request's
    media parts before they are decoded, so that a thousand of them are not decoded first."""
    count = len(items)
    if count > MAX_MEDIA_PER_REQUEST:
        message = (
            f"A request takes at most {MAX_MEDIA_PER_REQUEST} images or sounds; "
            f"this one has {count}."
        )
        raise APIError(400, message, ErrorKind.BAD_INPUT, dialect)


def _checked_image(raw: bytes, fmt: Format, dialect: Dialect, where: str) -> tuple[int, int]:
    """The size from the header, refused when empty or too large to be scaled down (an image
    too large to decode whole is scaled down later, off the event loop: image_scaling.py),
    before the rest of the file is walked for completeness."""
    try:
        width, height = image_size(raw, fmt)
        if width <= 0 or height <= 0:
            raise MediaFormatError(f"the {fmt.name} image has no pixels ({width}{_TIMES}{height})")
        check_scalable(MediaInput("image", raw, fmt.mime, width, height))
        check_complete(raw, fmt)
    except (MediaFormatError, ScalingError) as exc:
        raise _refuse(dialect, where, str(exc)) from None
    return width, height


def _decode_data_uri(text: str, dialect: Dialect, expect: str, where: str) -> tuple[bytes, str]:
    """The bytes and the declared MIME type of `data:<mime>[;param]*;base64,<data>`."""
    header, comma, payload = text[len("data:") :].partition(",")
    if not comma:
        raise _refuse(dialect, where, "the data: URI has no comma before its data")
    params = [part.strip().lower() for part in header.split(";")]
    if params[-1] != "base64":
        message = "the data: URI is not base64-encoded: send data:<type>;base64,<data>"
        raise _refuse(dialect, where, message)
    if "%" in payload:  # percent-encoded by some clients; "%" is not a base64 character
        payload = urllib.parse.unquote(payload)
    return _decode_base64(payload, dialect, expect, where), params[0]


def _decode_base64(text: str, dialect: Dialect, expect: str, where: str) -> bytes:
    """Base64 or base64url, with or without padding, whitespace anywhere; the decoded size
    is checked against the limit before decoding."""
    item = _ITEM[expect]
    try:
        compact = text.encode("ascii").translate(None, _WHITESPACE)
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise _refuse(dialect, where, f"the {item} is not valid base64 (it has {bad!r})") from None
    found = _NOT_BASE64.search(compact)
    if found:
        bad = found.group().decode("ascii")
        raise _refuse(dialect, where, f"the {item} is not valid base64 (it has {bad!r})")
    body = compact.rstrip(b"=").translate(_URLSAFE)
    if b"=" in body:
        raise _refuse(dialect, where, f"the {item} is not valid base64 (it has '=' before its end)")
    if len(body) % 4 == 1:
        message = f"the {item} is not valid base64 (its length, {len(body)}, cannot be decoded)"
        raise _refuse(dialect, where, message)
    size = len(body) * 3 // 4
    limit = {"image": MAX_IMAGE_BYTES, "audio": MAX_AUDIO_BYTES}.get(
        expect, max(MAX_IMAGE_BYTES, MAX_AUDIO_BYTES)
    )
    if size > limit:
        raise _refuse(dialect, where, _too_large(item, size, limit))
    try:
        return base64.b64decode(body + b"=" * (-len(body) % 4), validate=True)
    except binascii.Error as exc:  # not expected after the checks above
        reason = str(exc)
        raise _refuse(dialect, where, f"the {item} is not valid base64 ({reason})") from None


def _declared_kind(declared: str | None) -> str | None:
    """ "image", "audio", "video" from a MIME type or a bare format name; None when it says
    nothing about the kind (absent, application/octet-stream, unknown words)."""
    if not declared:
        return None
    name = declared.split(";")[0].strip().lower()
    if "/" in name:
        top = name.partition("/")[0]
        return top if top in ("image", "audio", "video") else None
    if name in _AUDIO_WORDS:
        return "audio"
    return "image" if name in _IMAGE_WORDS else None


def _not_media(raw: bytes, expect: str) -> str:
    if not raw:
        return f"the data is empty: it is not {_NOUNS[expect]}"
    known = unsupported(raw)
    if known is None:
        return f"the data is not {_NOUNS[expect]}"
    what, kind = known
    formats = _FORMATS.get(kind) or _NOUNS[expect]
    return f"{what} not supported: send {formats}"


def _too_large(item: str, size: int, limit: int) -> str:
    limit_text = f"{limit // MB} MB" if limit % MB == 0 else f"{limit:,} bytes"
    return f"the {item} is {size:,} bytes; at most {limit_text} are taken"


def _shown(text: str) -> str:
    """What the client sent, quoted on one line and cut short, for a message."""
    return repr(text[:40] + ("…" if len(text) > 40 else ""))


def _refuse(dialect: Dialect, where: str, message: str) -> APIError:
    """The 400, its message prefixed with the item's place when the caller named one."""
    text = f"{where}: {message}" if where else message[0].upper() + message[1:]
    return APIError(400, text, ErrorKind.BAD_INPUT, dialect)
