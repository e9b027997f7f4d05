"""Models from the network: `--hf owner/repo[:QUANT]` and `--model <URL>`, downloaded once.

- `--hf owner/repo[:QUANT]` (llama-server's convention): the repository's GGUF file of that
  quantization (default Q4_K_M; a split model's parts all come down, the first is loaded).
- `--model https://huggingface.co/<repo>/resolve/<rev>/<file>.gguf` (KoboldCpp accepts model
  URLs): that file.
Both go through `huggingface_hub` into its standard cache, so `HF_ENDPOINT`, `HF_TOKEN` and
`HF_HUB_CACHE` apply and an interrupted download resumes. Any other http(s) URL is fetched by a
small resumable downloader (HTTP ranges) into Hearth's cache folder. A file already complete in
a cache is used without any request, so a second start works offline.

Progress goes to the console as lines ("Downloading x.gguf: 40% (96/241 MB, 52.1 MB/s, 3 s
left)"); every failure is one `ModelFileError` sentence, never a traceback.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from server.base.netcheck import reachable
from server.models.files import (
    SPLIT_PART,
    ModelFileError,
    check_gguf_file,
    is_later_split_part,
    model_display_name,
    resolve_model_path,
)
from server.models.gguf import hash_file
from server.settings.config import HearthSettings

logger = logging.getLogger("hearth")

DEFAULT_QUANT = "Q4_K_M"
_HUB_HOSTS = {"huggingface.co", "hf.co", "www.huggingface.co"}
_QUANT_NAME = re.compile(r"(?<![A-Z0-9])(I?Q\d[\w]*?|F16|BF16|F32)(?=[-.]|$)")
_CHUNK = 1 << 20
_REPORT_EVERY_SECONDS = 2.0

Progress = Callable[[int, int | None], None]  # bytes done, bytes in all (None: unknown)


def model_for(settings: HearthSettings, progress: Progress | None = None) -> Path:
    """The local GGUF to load for these settings, downloading it first when it is remote."""
    report = progress or ConsoleProgress()
    if settings.hf:
        repo, quant = parse_hf_spec(settings.hf)
        return fetch_hub_quant(repo, quant, report)
    reference = settings.model_param
    if reference and urlparse(reference).scheme in ("http", "https"):
        hub_file = parse_hub_url(reference)
        if hub_file is not None:
            return fetch_hub_file(*hub_file, report)
        return fetch_url(reference, report)
    return resolve_model_path(reference)


# -- references ---------------------------------------------------------------------------


def parse_hf_spec(spec: str) -> tuple[str, str]:
    """`owner/repo[:QUANT]` (also `hf.co/owner/repo:QUANT`, Ollama's spelling)."""
    text = spec.strip().removeprefix("https://").removeprefix("hf.co/")
    text = text.removeprefix("huggingface.co/")
    repo, _, quant = text.partition(":")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ModelFileError(f"--hf {spec}: expected owner/repo or owner/repo:QUANT")
    return repo, (quant or DEFAULT_QUANT).upper()


def parse_hub_url(url: str) -> tuple[str, str, str] | None:
    """(repo, file, revision) of a huggingface.co `resolve` (or `blob`) URL, else None."""
    parsed = urlparse(url)
    if parsed.hostname not in _HUB_HOSTS:
        return None
    parts = unquote(parsed.path).strip("/").split("/")
    if len(parts) < 5 or parts[2] not in ("resolve", "blob"):
        return None
    return f"{parts[0]}/{parts[1]}", "/".join(parts[4:]), parts[3]


def pick_quant_file(files: list[str], quant: str, repo: str) -> list[str]:
    """The GGUF file(s) of `quant` in a repository's file list: one file, or every part of a
    split model in order. Projectors (mmproj) are never the model."""
    pattern = re.compile(rf"(?<![A-Z0-9]){re.escape(quant.upper())}(?![A-Z0-9])")
    candidates = [
        name
        for name in files
        if name.lower().endswith(".gguf")
        and "mmproj" not in name.lower()
        and pattern.search(Path(name).name.upper())
    ]
    if not candidates:
        available = sorted({q for name in files for q in quants_in(name)})
        listed = ", ".join(available) if available else "no GGUF files"
        raise ModelFileError(f"{repo} has no {quant} GGUF file (it has: {listed})")
    first = min(candidates, key=lambda name: (name.count("/"), len(name), name))
    split = SPLIT_PART.search(first)
    if split is None:
        return [first]
    stem = first[: split.start()]
    return sorted(name for name in candidates if name.startswith(stem) and SPLIT_PART.search(name))


def quants_in(name: str) -> list[str]:
    if not name.lower().endswith(".gguf"):
        return []
    found = _QUANT_NAME.findall(Path(name).name.upper())
    return [quant.rstrip("_") for quant in found]


# -- Hugging Face Hub -----------------------------------------------------------------------


def fetch_hub_quant(repo: str, quant: str, progress: Progress) -> Path:
    cached = _cached_quant(repo, quant)
    if cached is not None:
        logger.info("Model: %s from the Hugging Face cache (%s)", cached.name, repo)
        return cached
    return _fetch_quant_parts(repo, quant, progress)


def _fetch_quant_parts(
    repo: str, quant: str, progress: Progress, announce: Announce | None = None
) -> Path:
    """Every part of `quant` in the repository (each from the cache when complete there);
    the first part, the one to load."""
    files = hub_call(repo, lambda api: api.list_repo_files(repo))
    parts = pick_quant_file(files, quant, repo)
    paths = [fetch_hub_file(repo, part, "main", progress, announce=announce) for part in parts]
    return paths[0]


class DownloadCancelled(Exception):
    """Raised from a progress callback to stop a download; its partial file is kept, so the
    next attempt resumes."""


# Told the content digest (the hub's ETag: an LFS file's SHA-256) and size of each file as
# its download starts, for Ollama's pull lines.
Announce = Callable[[str, int | None], None]


def pull_hub_model(
    spec: str, announce: Announce, progress: Progress, cancelled: Callable[[], bool]
) -> tuple[str, Path]:
    """Ollama's pull for `hf.co/owner/repo[:QUANT]`: every part of that quantization into the
    hub cache (a complete one is only announced). Returns the model's name and file to load.
    `cancelled` is checked as bytes arrive (the partial file is kept for the next pull)."""
    repo, quant = parse_hf_spec(spec)

    def checked(done: int, total: int | None) -> None:
        if cancelled():
            raise DownloadCancelled
        progress(done, total)

    path = _fetch_quant_parts(repo, quant, checked, announce)
    return hub_model_name(repo, path), path


def delete_hub_model(spec: str, keep: Iterable[Path]) -> list[Path]:
    """Ollama's delete for `hf.co/owner/repo[:QUANT]`: the cached parts of that quantization
    (links and blobs). Refuses the files of loaded models (`keep`). Returns what was removed; empty
    when nothing of it is in the cache."""
    repo, quant = parse_hf_spec(spec)
    first = _cached_quant(repo, quant)
    if first is None:
        return []
    snapshot = first.parent
    files = [str(p.relative_to(snapshot)) for p in snapshot.rglob("*.gguf") if p.exists()]
    parts = [snapshot / name for name in pick_quant_file(files, quant, repo)]
    blobs = [Path(os.path.realpath(part)) for part in parts]
    if any(Path(os.path.realpath(path)) in blobs for path in keep):
        raise ModelFileError(
            f"{spec} is loaded: unload it first (a request with keep_alive 0), then delete it"
        )
    for link, blob in zip(parts, blobs, strict=True):
        link.unlink(missing_ok=True)
        if blob != link:
            blob.unlink(missing_ok=True)
    return parts


def fetch_hub_file(
    repo: str,
    filename: str,
    revision: str,
    progress: Progress,
    token: str | None = None,
    announce: Announce | None = None,
) -> Path:
    """One file of a repository: from the hub cache when it is complete there (no request),
    else downloaded into it. `announce` hears its digest and size first (Ollama's pull)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, filename, revision=revision)
    if isinstance(found, str) and Path(found).is_file():
        cached = Path(found)
        logger.info("Model: %s from the Hugging Face cache (%s)", cached.name, repo)
        if announce is not None:
            size = cached.stat().st_size
            announce(Path(os.path.realpath(cached)).name, size)
            progress(size, size)
        return cached
    logger.info("Downloading %s from %s", filename, repo)
    path = _download_into_hub_cache(repo, filename, revision, progress, token, announce)
    check_gguf_file(path)
    return path


def _download_into_hub_cache(
    repo: str,
    filename: str,
    revision: str,
    progress: Progress,
    token: str | None,
    announce: Announce | None = None,
) -> Path:
    """Download one file into huggingface_hub's cache layout, resumable across attempts.

    huggingface_hub (2.x) retries a broken transfer within one call but deletes its partial
    file when the call fails, so a cancelled or interrupted download would start over. Here
    the file's metadata comes from the hub client (`get_hf_file_metadata`: commit, ETag,
    size, the download location), the bytes go to `blobs/<etag>.part` with HTTP ranges, the
    SHA-256 is checked against the ETag (an LFS file's ETag is its SHA-256), and the finished
    blob is linked from `snapshots/<commit>/<file>` with `refs/<revision>`: the standard layout,
    which `hf_hub_download(local_files_only=True)` and the hub's cache tools read."""
    import httpx
    from huggingface_hub import get_hf_file_metadata, get_token, hf_hub_url

    url = hf_hub_url(repo, filename, revision=revision)
    meta = hub_call(repo, lambda _api: get_hf_file_metadata(url, token=token), filename)
    etag = str(meta.etag or "").strip('"')
    commit = str(meta.commit_hash or revision)
    if not re.fullmatch(r"[\w.-]+", etag):
        raise ModelFileError(f"{repo}/{filename}: the hub sent no usable ETag")
    storage = _repo_cache(repo)
    blob = storage / "blobs" / etag
    if announce is not None:
        announce(etag, meta.size)
    if not blob.is_file():
        blob.parent.mkdir(parents=True, exist_ok=True)
        partial = blob.with_name(etag + ".part")
        bearer = token or get_token()  # HF_TOKEN, or the token `hf auth login` stored
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        try:
            _download_resumable(httpx, meta.location or url, partial, progress, headers)
        except httpx.HTTPStatusError as exc:
            status = exc.response.status_code
            raise ModelFileError(f"{repo}/{filename}: the hub answered HTTP {status}") from None
        except OSError as exc:
            raise _os_error(f"{repo}/{filename}", exc) from None
        if re.fullmatch(r"[0-9a-f]{64}", etag) and hash_file(partial) != etag:
            partial.unlink()
            raise ModelFileError(f"{repo}/{filename}: the download is corrupt (checksum)")
        os.replace(partial, blob)
    snapshot = storage / "snapshots" / commit / filename
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    if not snapshot.exists():
        try:
            snapshot.symlink_to(os.path.relpath(blob, snapshot.parent))
        except OSError:  # no symlinks (Windows without developer mode): the hub copies too
            shutil.copyfile(blob, snapshot)
    if commit != revision:
        refs = storage / "refs" / revision
        refs.parent.mkdir(parents=True, exist_ok=True)
        refs.write_text(commit)
    return snapshot


def _repo_cache(repo: str) -> Path:
    """The repository's folder in huggingface_hub's cache (its standard layout)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}"


def downloaded_models() -> list[tuple[str, Path]]:
    """(Ollama-style name `hf.co/owner/repo:QUANT`, first file) of every complete GGUF model in
    the hub cache, newest snapshot first when a repository has several. No request is made."""
    from huggingface_hub import constants

    found: dict[str, Path] = {}
    cache = Path(constants.HF_HUB_CACHE)
    if not cache.is_dir():
        return []
    snapshots = sorted(
        cache.glob("models--*/snapshots/*"), key=lambda path: path.stat().st_mtime, reverse=True
    )
    for snapshot in snapshots:
        repo = snapshot.parent.parent.name.removeprefix("models--").replace("--", "/", 1)
        for path in sorted(snapshot.rglob("*.gguf")):
            if not path.exists() or "mmproj" in path.name.lower() or is_later_split_part(path):
                continue  # a link to a blob still downloading, a projector, a later part
            found.setdefault(hub_model_name(repo, path), path)
    return sorted(found.items())


def hub_model_name(repo: str, path: Path) -> str:
    """Ollama's name for a model file from the hub: `hf.co/owner/repo:QUANT`."""
    quants = quants_in(path.name)
    return f"hf.co/{repo}:{quants[-1] if quants else model_display_name(path)}"


def _cached_quant(repo: str, quant: str) -> Path | None:
    """A complete file of `quant` already in the hub cache (no request at all)."""
    folder = _repo_cache(repo) / "snapshots"
    if not folder.is_dir():
        return None
    for snapshot in sorted(folder.iterdir()):
        files = [
            str(path.relative_to(snapshot)) for path in snapshot.rglob("*.gguf") if path.exists()
        ]
        try:
            parts = pick_quant_file(files, quant, repo)
        except ModelFileError:
            continue
        if all((snapshot / part).is_file() for part in parts):
            return snapshot / parts[0]
    return None


def hub_call(repo: str, call: Callable[[Any], Any], filename: str = "") -> Any:
    """Run a hub request; its failures become one sentence."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub import errors as hub_errors

    where = f"{repo}/{filename}" if filename else repo
    if not reachable(constants.ENDPOINT):
        # huggingface_hub retries a refused connection with backoff for ~20 s first
        raise ModelFileError(f"{where}: cannot reach {constants.ENDPOINT} (is the network down?)")
    try:
        return call(HfApi())
    except hub_errors.GatedRepoError:
        raise ModelFileError(
            f"{repo} is gated: accept its terms on huggingface.co, then set HF_TOKEN "
            "(or the launcher's token field)"
        ) from None
    except hub_errors.RepositoryNotFoundError:
        raise ModelFileError(
            f"{repo}: no such repository on {constants.ENDPOINT} (a private one needs HF_TOKEN)"
        ) from None
    except (hub_errors.EntryNotFoundError, hub_errors.RevisionNotFoundError):
        raise ModelFileError(f"{where}: no such file in the repository") from None
    except hub_errors.HfHubHTTPError as exc:
        raise ModelFileError(f"{where}: the hub answered {_status(exc)}") from None
    except OSError as exc:
        raise _os_error(where, exc) from None
    except Exception as exc:  # network errors come from httpx or requests, by version
        if "connect" in type(exc).__name__.lower() or "timeout" in type(exc).__name__.lower():
            raise ModelFileError(
                f"{where}: cannot reach {constants.ENDPOINT} (is the network down?)"
            ) from None
        raise


def _status(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return f"HTTP {code}" if code else str(exc).splitlines()[0]


def _os_error(where: str, exc: OSError) -> ModelFileError:
    if exc.errno == errno.ENOSPC:
        return ModelFileError(f"{where}: the disk is full (free some space and start again)")
    if "connect" in str(exc).lower():
        return ModelFileError(f"{where}: cannot connect (is the network down?)")
    return ModelFileError(f"{where}: {exc.strerror or exc}")


# -- any other URL ----------------------------------------------------------------------------


def download_folder() -> Path:
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
        _download_resumable(httpx, url, partial, progress, {})
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code
        raise ModelFileError(f"{url}: the server answered HTTP {status}") from None
    except OSError as exc:
        raise _os_error(url, exc) from None
    os.replace(partial, target)
    check_gguf_file(target)
    return target


def _download_resumable(
    httpx: Any, url: str, partial: Path, progress: Progress, headers: dict[str, str]
) -> None:
    """Fill `partial` from `url`; a broken connection is resumed (5 tries) with a range, and a
    partial file left by an earlier attempt is continued, not restarted."""
    for _attempt in range(5):
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
