"""Ollama's /api/pull as a stream of progress lines, for Hugging Face models.

The download (server/models/fetch.py) runs on a worker thread and hands its steps to the event
loop through a queue; progress lines go out at most every 250 ms. A client that leaves stops
the download (its partial file stays, so the next pull resumes). Pulls of the same name share
one lock, so two clients never write the same partial file.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from server.dialects.ollama.schemas import PullProgress
from server.models.fetch import DownloadCancelled, pull_hub_model
from server.models.files import ModelFileError

PROGRESS_EVERY_SECONDS = 0.25
HUB_PREFIXES = ("hf.co/", "huggingface.co/", "https://hf.co/", "https://huggingface.co/")


@dataclass
class PullLocks:
    """One lock per model name (kept on app.state)."""

    locks: dict[str, threading.Lock] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def lock(self, name: str) -> threading.Lock:
        with self.guard:
            return self.locks.setdefault(name.lower(), threading.Lock())


def pullable(name: str) -> bool:
    return name.lower().startswith(HUB_PREFIXES)


async def pull_progress(
    name: str, locks: PullLocks, pulled: Callable[[str, Path], object]
) -> AsyncIterator[PullProgress | str]:
    """The pull's progress lines; a failure ends the stream with its message (a `str`).
    `pulled(model name, file)` runs on the event loop before the "success" line."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[PullProgress | str | None] = asyncio.Queue()
    stop = threading.Event()

    def put(item: PullProgress | str | None) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def work() -> None:
        digest = ""
        last = 0.0

        def announce(file_digest: str, size: int | None) -> None:
            nonlocal digest
            digest = f"sha256:{file_digest}"
            line: PullProgress = {"status": f"pulling {file_digest[:12]}", "digest": digest}
            if size is not None:
                line["total"] = size
                line["completed"] = 0
            put(line)

        def progress(done: int, total: int | None) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last < PROGRESS_EVERY_SECONDS and not (total and done >= total):
                return
            last = now
            line: PullProgress = {"status": f"pulling {digest[7:19]}", "digest": digest}
            line["completed"] = done
            if total:
                line["total"] = total
            put(line)

        try:
            with locks.lock(name):
                put({"status": "pulling manifest"})
                model = pull_hub_model(name, announce, progress, stop.is_set)
            loop.call_soon_threadsafe(pulled, *model)
            put({"status": "verifying sha256 digest"})
            put({"status": "writing manifest"})
            put({"status": "success"})
        except DownloadCancelled:
            pass
        except ModelFileError as exc:
            put(str(exc))
        finally:
            put(None)

    worker = threading.Thread(target=work, name="ollama-pull", daemon=True)
    worker.start()
    try:
        while (item := await queue.get()) is not None:
            yield item
    finally:
        stop.set()  # the client left (or the stream ended): stop downloading
