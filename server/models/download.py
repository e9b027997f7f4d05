"""Resumable HTTP downloads with progress, for model files.

`fetch_url` downloads any http(s) URL once into Hearth's download folder; `download_resumable`
is the loop under it and under the Hub's downloads (server/models/hub_files.py): the bytes go
to a `.part` file, a broken connection is resumed with an HTTP range, and a partial file left by
an earlier attempt is continued, not restarted. Progress goes to a callback (`ConsoleProgress`
writes console lines: "Downloading: 40% (96/241 MB, 52.1 MB/s, 3 s left)"); failures become one
`ModelFileError` sentence.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from server.models.files import ModelFileError, check_gguf_file

logger = logging.getLogger("hearth")

_CHUNK = 1 << 20
_REPORT_EVERY_SECONDS = 2.0
_ATTEMPTS = 5

Progress = Callable[[int, int | None], None]  # bytes done, bytes in all (None: unknown)


class DownloadCancelled(Exception):
    """Raised from a progress callback to stop a download; its partial file is kept, so the
    next attempt resumes."""


def download_folder() -> Path:
    """Where `fetch_url` keeps its files: $HEARTH_DOWNLOAD_DIR, else the user cache folder."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("HEARTH_DOWNLOAD_DIR") or base / "hearth" / "downloads")


def fetch_url(url: str, progress: Progress) -> Path:
    """Download `url` once into the cache, resuming a partial file with an HTTP range."""
    import httpx

    name = Path(unquote(urlparse(url).path)).name or "model.gguf"
    folder = download_folder() / hashlib.sha256(url.encode()).hexdigest()[:16]
    target = folder / name
    if target.is_file():
        logger.info("Model: %s from the download cache", name)
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(name + ".part")
    logger.info("Downloading %s", url)
    try:
        download_resumable(httpx, url, partial, progress, {})
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code
        raise ModelFileError(f"{url}: the server answered HTTP {status}") from None
    except OSError as exc:
        raise download_error(url, exc) from None
    os.replace(partial, target)
    check_gguf_file(target)
    return target


def download_resumable(
    httpx: Any, url: str, partial: Path, progress: Progress, headers: dict[str, str]
) -> None:
    """Fill `partial` from `url`; a broken connection is resumed (5 tries) with a range, and a
    partial file left by an earlier attempt is continued, not restarted. `httpx` is the module,
    passed in so that importing this one stays cheap."""
    for _attempt in range(_ATTEMPTS):
        try:
            _fetch_range(httpx, url, partial, progress, headers)
            return
        except (httpx.TransportError, httpx.RemoteProtocolError) as exc:
            logger.info("Download interrupted (%s); resuming", type(exc).__name__)
    raise ModelFileError(f"{url}: the download kept failing (is the network down?)")


def _fetch_range(
    httpx: Any, url: str, partial: Path, progress: Progress, extra: dict[str, str]
) -> None:
    done = partial.stat().st_size if partial.exists() else 0
    headers = {**extra, **({"Range": f"bytes={done}-"} if done else {})}
    with httpx.stream("GET", url, headers=headers, follow_redirects=True, timeout=30) as reply:
        if reply.status_code == 416:  # the partial file is already whole
            return
        reply.raise_for_status()
        if done and reply.status_code != 206:
            done = 0  # the server ignored the range: start over
        length = reply.headers.get("Content-Length")
        total = done + int(length) if length and length.isdigit() else None
        with partial.open("ab" if done else "wb") as handle:
            for chunk in reply.iter_bytes(_CHUNK):
                handle.write(chunk)
                done += len(chunk)
                progress(done, total)
    if total is not None and done < total:
        raise httpx.RemoteProtocolError("the connection closed before the end of the file")


def download_error(where: str, exc: OSError) -> ModelFileError:
    """A download's OSError as one sentence about `where` (a URL, or repo/file)."""
    if exc.errno == errno.ENOSPC:
        return ModelFileError(f"{where}: the disk is full (free some space and start again)")
    if "connect" in str(exc).lower():
        return ModelFileError(f"{where}: cannot connect (is the network down?)")
    return ModelFileError(f"{where}: {exc.strerror or exc}")


class ConsoleProgress:
    """Download progress as console lines: at most one every 2 s, and the last one."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._last = self._started  # the first line after 2 s, when the speed means something

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if now - self._last < _REPORT_EVERY_SECONDS and not finished:
            return
        self._last = now
        elapsed = max(now - self._started, 1e-6)
        speed = done / elapsed
        if total:
            left = (total - done) / speed if speed > 0 else 0
            logger.info(
                "Downloading: %d%% (%d/%d MB, %.1f MB/s, %d s left)",
                done * 100 // total,
                done // 2**20,
                total // 2**20,
                speed / 2**20,
                left,
            )
        else:
            logger.info("Downloading: %d MB (%.1f MB/s)", done // 2**20, speed / 2**20)
