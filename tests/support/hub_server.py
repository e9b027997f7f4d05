"""A local stand-in for the Hugging Face Hub: the API routes `huggingface_hub` uses, over HTTP.

Tests point `HF_ENDPOINT` at it (no internet here). It serves repositories made of local files:
model search (`/api/models?search=`), a repository's info and file tree, and `resolve` downloads
with the headers the client checks (`X-Repo-Commit`, `ETag`, sizes) and byte ranges, so a
broken download can resume. Plain `/files/<name>` URLs serve the same files for the generic
downloader. Every request is recorded (method, path, Range header) for the tests to inspect,
and `cut_after` makes the next download of a file stop after that many bytes.
`serve_hub` runs one with repositories made of the bundled model (one of them a copy renamed
in its metadata: tests/support/gguf_rename.py) and points huggingface_hub at it for the test.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"
CHUNK = 1 << 20


@dataclass
class HubRepo:
    repo_id: str
    files: dict[str, Path]  # file name in the repo -> local file
    downloads: int = 1000
    likes: int = 10
    gated: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    range: str | None


@dataclass
class LocalHub:
    repos: dict[str, HubRepo] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    cut_after: dict[str, int] = field(default_factory=dict)  # file name -> bytes, once
    seconds_per_chunk: float = 0.0  # a slow network, so a download can be cancelled midway
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def add(self, repo: HubRepo) -> None:
        self.repos[repo.repo_id] = repo

    def start(self) -> LocalHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                hub.handle(self, head=True)

            def do_GET(self) -> None:
                hub.handle(self, head=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def downloads_of(self, name: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == "GET" and r.path.endswith("/" + name)]

    # -- routes ----------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler, head: bool) -> None:
        parsed = urlparse(request.path)
        path = unquote(parsed.path)
        self.requests.append(Recorded(request.command, path, request.headers.get("Range")))
        if path == "/api/models":
            return self._json(request, self._search(parse_qs(parsed.query)))
        match = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/[^/]+)?", path)
        if match:
            return self._repo_info(request, match.group(1))
        match = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/[^/]+/?(.*)", path)
        if match:
            return self._tree(request, match.group(1))
        match = re.fullmatch(r"/([^/]+/[^/]+)/resolve/[^/]+/(.+)", path)
        if match:
            repo = self.repos.get(match.group(1))
            if repo is None:
                return self._error(request, 404, "RepoNotFound", "Repository not found")
            if repo.gated:
                return self._error(request, 403, "GatedRepo", "Access to this repo is gated")
            local = repo.files.get(match.group(2))
            if local is None:
                return self._error(request, 404, "EntryNotFound", "Entry not found")
            return self._file(request, local, match.group(2), head)
        match = re.fullmatch(r"/files/(.+)", path)
        if match:
            local = next(
                (f for r in self.repos.values() for n, f in r.files.items() if n == match.group(1)),
                None,
            )
            if local is None:
                return self._error(request, 404, "EntryNotFound", "no such file")
            return self._file(request, local, match.group(1), head)
        return self._error(request, 404, "NotFound", "no such route")

    def _search(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        words = (query.get("search") or [""])[0].lower().split()
        return [
            {
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "downloads": repo.downloads,
                "likes": repo.likes,
                "tags": ["gguf"],
                "gated": repo.gated,
            }
            for repo in self.repos.values()
            if all(word in repo.repo_id.lower() for word in words)
        ]

    def _repo_info(self, request: BaseHTTPRequestHandler, repo_id: str) -> None:
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._error(request, 404, "RepoNotFound", "Repository not found")
        self._json(
            request,
            {
                "id": repo_id,
                "modelId": repo_id,
                "sha": COMMIT,
                "downloads": repo.downloads,
                "likes": repo.likes,
                "gated": repo.gated,
                "tags": ["gguf"],
                "siblings": [
                    {"rfilename": name, "size": local.stat().st_size}
                    for name, local in repo.files.items()
                ],
            },
        )

    def _tree(self, request: BaseHTTPRequestHandler, repo_id: str) -> None:
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._error(request, 404, "RepoNotFound", "Repository not found")
        self._json(
            request,
            [
                {"type": "file", "path": name, "size": local.stat().st_size, "oid": _etag(local)}
                for name, local in repo.files.items()
            ],
        )

    def _file(self, request: BaseHTTPRequestHandler, local: Path, name: str, head: bool) -> None:
        size = local.stat().st_size
        start = 0
        wanted = request.headers.get("Range")
        if wanted:
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted)
            start = int(match.group(1)) if match else 0
        status = 206 if wanted and start > 0 else 200
        request.send_response(status)
        etag = f'"{_etag(local)}"'
        request.send_header("ETag", etag)
        request.send_header("X-Linked-Etag", etag)
        request.send_header("X-Linked-Size", str(size))
        request.send_header("X-Repo-Commit", COMMIT)
        request.send_header("Accept-Ranges", "bytes")
        request.send_header("Content-Length", str(size - start))
        if status == 206:
            request.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        request.end_headers()
        if head:
            return
        limit = self.cut_after.pop(name, None)
        sent = 0
        with local.open("rb") as handle:
            handle.seek(start)
            while chunk := handle.read(CHUNK):
                if limit is not None and sent + len(chunk) > limit:
                    request.wfile.write(chunk[: limit - sent])
                    request.wfile.flush()
                    request.close_connection = True
                    request.connection.shutdown(2)  # the network drops mid-file
                    return
                request.wfile.write(chunk)
                sent += len(chunk)
                if self.seconds_per_chunk:
                    time.sleep(self.seconds_per_chunk)

    @staticmethod
    def _json(request: BaseHTTPRequestHandler, body: Any) -> None:
        data = json.dumps(body).encode()
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(data)

    @staticmethod
    def _error(request: BaseHTTPRequestHandler, status: int, code: str, message: str) -> None:
        data = json.dumps({"error": message}).encode()
        request.send_response(status)
        request.send_header("X-Error-Code", code)
        request.send_header("X-Error-Message", message)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(data)


_ETAGS: dict[tuple[str, int, int], str] = {}


def _etag(local: Path) -> str:
    """The file's SHA-256 (what the Hub sends for LFS files), remembered per file version."""
    stat = local.stat()
    key = (str(local), stat.st_size, stat.st_mtime_ns)
    if key not in _ETAGS:
        digest = hashlib.sha256()
        with local.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
        _ETAGS[key] = digest.hexdigest()
    return _ETAGS[key]


REPO = "hearth-test/gemma-3-270m-GGUF"
MODEL_FILE = "gemma-3-270m-Q4_K_M.gguf"
GATED_REPO = "hearth-test/gated-GGUF"
# The second repository: the bundled weights under another name in their metadata.
STORY_REPO = "hearth-test/story-writer-GGUF"
STORY_FILE = "story-writer-Q4_K_M.gguf"
STORY_NAME = "Story Writer 270M, a renamed copy for Hearth's tests"


def serve_hub(model: Path, cache: Path, monkeypatch: Any, story: Path | None = None) -> LocalHub:
    """A started LocalHub with REPO (Q4_K_M and Q8_0 files), a gated repo and, given `story`
    (a `gguf_rename.renamed_copy`), STORY_REPO; huggingface_hub's endpoint and cache point at
    it and `cache` for this test (its constants are read at import, so they are patched, not
    the environment)."""
    from huggingface_hub import constants

    hub = LocalHub()
    hub.add(HubRepo(REPO, {MODEL_FILE: model, "gemma-3-270m-Q8_0.gguf": model}))
    hub.add(HubRepo(GATED_REPO, {MODEL_FILE: model}, gated=True))
    if story is not None:
        hub.add(HubRepo(STORY_REPO, {STORY_FILE: story}))
    hub.start()
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(
        constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        hub.url + "/{repo_id}/resolve/{revision}/{filename}",
    )
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache / "hub"))
    monkeypatch.setenv("HEARTH_DOWNLOAD_DIR", str(cache / "downloads"))
    return hub
