"""llama-server's `--media-path DIR`: a request's `file://` image URLs read from that folder.

A local client (an editor, a script on the same machine) can name an image by its path instead
of sending its bytes. Only files under the folder the server was started with are read: the
URL's path is taken relative to it (`file://mtmd/a.jpeg` and `file:////mtmd//a.jpeg` are the
same file, as llama-server takes them), a `..` in it is refused, and a path that leads out of the
folder once resolved (a symbolic link) is refused too. Without `--media-path` a `file://` URL
is left to the adapter, which refuses it as any URL that is not a data: URI. Like the remote
fetches (server/dialects/media/remote_media.py), this happens before planning, on a worker thread,
turning each URL into a data: URI that the edge then checks as any image (dialects/media/media.py).
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

from server.dialects.edge.errors import APIError, Dialect, ErrorKind
from server.dialects.media.media import MAX_AUDIO_BYTES, MAX_IMAGE_BYTES, check_media_count
from server.dialects.media.remote_media import image_urls

_SCHEME = "file://"
_LIMIT = max(MAX_IMAGE_BYTES, MAX_AUDIO_BYTES)


class _Refused(ValueError):
    pass


async def read_local_images(body: object, media_path: str | None, dialect: Dialect) -> None:
    """Replace each `file://` image URL in `body` by the data: URI of the file it names under
    `media_path`; without `media_path`, leave them for the adapter to refuse. A 400 naming the
    item for the first that cannot be read."""
    if not media_path:
        return
    found = image_urls(body, (_SCHEME,))
    if not found:
        return
    check_media_count(found, dialect)
    folder = Path(media_path)
    for item in found:
        try:
            data = await asyncio.to_thread(_read, folder, item.url)
        except _Refused as exc:
            raise APIError(400, f"{item.where}: {exc}", ErrorKind.BAD_INPUT, dialect) from None
        item.replace("data:application/octet-stream;base64," + base64.b64encode(data).decode())


def _read(folder: Path, url: str) -> bytes:
    """The bytes of the file `url` names under `folder`, or _Refused saying why not."""
    relative = url.strip()[len(_SCHEME) :]
    parts = [part for part in relative.split("/") if part]
    if not parts or any(part in (".", "..") for part in parts) or "\\" in relative:
        raise _Refused(f"the file URL {url!r} must name a file inside the media folder")
    root = folder.resolve()
    path = root.joinpath(*parts).resolve()
    if not path.is_relative_to(root):
        raise _Refused(f"the file URL {url!r} leads out of the media folder")
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise _Refused(f"the file URL {url!r} does not name a file")
        if size > _LIMIT:
            raise _Refused(f"the file {url!r} is {size:,} bytes; at most {_LIMIT:,} are read")
        return path.read_bytes()
    except OSError:
        raise _Refused(f"the file {url!r} is not in the media folder") from None
