"""HubClient: Hugging Face searches and downloads for the launcher, off the GUI thread.

One background thread per task; results come back as Qt signals (queued to the GUI thread, as
the emitting object lives there). A download reports progress at most every 100 ms and stops
when cancelled; huggingface_hub keeps the partial file, so Download again resumes it. Widgets
call `search`, `list_files`, `download`, `cancel` and listen; they never touch the network or
the files themselves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from server.models.fetch import DownloadCancelled, fetch_hub_file
from server.models.files import ModelFileError
from server.models.hub import ModelFile, repository_files, search_repositories

_PROGRESS_EVERY_SECONDS = 0.1


class HubClient(QObject):
    searched = Signal(list)  # list[RepoHit]
    files_listed = Signal(str, list)  # repo, list[ModelFile]
    progress = Signal(int, int, float)  # bytes done, bytes in all (0: unknown), bytes/s
    downloaded = Signal(str)  # the local path of the file to load
    cancelled = Signal()
    failed = Signal(str)  # one sentence

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.token: str | None = None
        self._cancel = threading.Event()
        self._download: threading.Thread | None = None

    @property
    def downloading(self) -> bool:
        return self._download is not None and self._download.is_alive()

    def search(self, query: str) -> None:
        self._run(lambda: self.searched.emit(search_repositories(query, self.token)))

    def list_files(self, repo: str) -> None:
        self._run(lambda: self.files_listed.emit(repo, repository_files(repo, self.token)))

    def download(self, file: ModelFile) -> None:
        if self._download is not None and self.downloading:
            if not self._cancel.is_set():
                return  # one download at a time
            self._download.join()  # a cancelled one is ending (its partial file closing)
        self._cancel.clear()
        self._download = self._run(lambda: self._fetch(file))

    def cancel(self) -> None:
        self._cancel.set()

    def wait(self, timeout: float = 30.0) -> None:
        """Block until a running download has ended (closing the launcher)."""
        if self._download is not None:
            self._download.join(timeout)

    def _fetch(self, file: ModelFile) -> None:
        started = time.monotonic()
        last = 0.0
        finished_parts = 0

        def report(done: int, total: int | None) -> None:
            nonlocal last
            if self._cancel.is_set():
                raise DownloadCancelled
            now = time.monotonic()
            if now - last >= _PROGRESS_EVERY_SECONDS or (total and done >= total):
                last = now
                so_far = finished_parts + done
                speed = so_far / max(now - started, 1e-6)
                self.progress.emit(so_far, file.size or total or 0, speed)

        paths = []
        for part in file.parts:
            paths.append(fetch_hub_file(file.repo, part, "main", report, self.token))
            finished_parts += paths[-1].stat().st_size
        self.downloaded.emit(str(paths[0]))

    def _run(self, task: Callable[[], Any]) -> threading.Thread:
        def guarded() -> None:
            try:
                task()
            except DownloadCancelled:
                self.cancelled.emit()
            except ModelFileError as exc:
                self.failed.emit(str(exc))

        thread = threading.Thread(target=guarded, daemon=True)
        thread.start()
        return thread
