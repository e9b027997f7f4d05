"""Model files in huggingface_hub's cache: downloaded into it, found in it, deleted from it.

Files go into the hub's standard cache layout (`blobs/`, `snapshots/<commit>/`, `refs/`), so
`HF_HUB_CACHE`, `HF_ENDPOINT` and `HF_TOKEN` apply and the hub's own cache tools read them. A
file already complete in the cache is used without any request, so a second start works
offline; an interrupted download resumes (server/models/download.py). `--hf` brings the
repository's projector (mmproj) with the model and later finds it beside the model in the
cache. Ollama's pull and delete of `hf.co/owner/repo[:QUANT]` and its list of downloaded models
work on the same cache.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from server.models.download import DownloadCancelled, Progress, download_error, download_resumable
from server.models.files import ModelFileError, check_gguf_file, is_later_split_part
from server.models.gguf import hash_file
from server.models.hub_names import hub_model_name, parse_hf_spec, pick_quant_file
from server.models.hub_request import hub_call
from server.models.projector_files import is_projector_name, pick_repo_projector

logger = logging.getLogger("hearth")

# Told the content digest (the hub's ETag: an LFS file's SHA-256) and size of each file as
# its download starts, for Ollama's pull lines.
Announce = Callable[[str, int | None], None]


@dataclass(frozen=True, slots=True)
class HubModel:
    path: Path  # the file to load (a split model's first part)
    projector: Path | None = None  # the repository's projector (mmproj), when one was asked


def fetch_hub_model(
    repo: str, quant: str, progress: Progress, projector_progress: Progress | None = None
) -> HubModel:
    """`--hf repo:QUANT`: the file to load, from the cache when every part is complete there;
    given `projector_progress`, also the repository's projector as llama-server's `-hf` picks
    it (projector_files.py), from the cache beside the model or downloaded with it."""
    cached = _cached_quant(repo, quant)
    if cached is not None:
        logger.info("Model: %s from the Hugging Face cache (%s)", cached.name, repo)
        found = None if projector_progress is None else _cached_projector(repo, cached)
        if found is not None:
            logger.info("Projector: %s from the Hugging Face cache (%s)", found.name, repo)
        return HubModel(cached, found)
    return _fetch_quant_parts(repo, quant, progress, projector_progress=projector_progress)


def _fetch_quant_parts(
    repo: str,
    quant: str,
    progress: Progress,
    announce: Announce | None = None,
    projector_progress: Progress | None = None,
) -> HubModel:
    """Every part of `quant` in the repository (each from the cache when complete there),
    the first being the one to load; given `projector_progress`, the repository's projector
    too."""
    files = hub_call(repo, lambda api: api.list_repo_files(repo))
    parts = pick_quant_file(files, quant, repo)
    projector = None
    name = pick_repo_projector(files, parts[0])
    if projector_progress is not None and name is not None:
        # First: a model complete in the cache is never left without its projector.
        logger.info("Projector: %s, with the model (--no-mmproj: text only)", name)
        projector = fetch_hub_file(repo, name, "main", projector_progress)
    paths = [fetch_hub_file(repo, part, "main", progress, announce=announce) for part in parts]
    return HubModel(paths[0], projector)


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

    path = _fetch_quant_parts(repo, quant, checked, announce).path
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
        kind = "Projector" if is_projector_name(filename) else "Model"
        logger.info("%s: %s from the Hugging Face cache (%s)", kind, cached.name, repo)
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
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

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
        _download_blob(f"{repo}/{filename}", meta.location or url, blob, progress, token)
    return _link_snapshot(storage, blob, commit, revision, filename)


def _download_blob(where: str, url: str, blob: Path, progress: Progress, token: str | None) -> None:
    """The bytes of `blob` (named by its ETag) through `<etag>.part`, checked by SHA-256."""
    import httpx
    from huggingface_hub import get_token

    etag = blob.name
    blob.parent.mkdir(parents=True, exist_ok=True)
    partial = blob.with_name(etag + ".part")
    bearer = token or get_token()  # HF_TOKEN, or the token `hf auth login` stored
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    try:
        download_resumable(httpx, url, partial, progress, headers)
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code
        raise ModelFileError(f"{where}: the hub answered HTTP {status}") from None
    except OSError as exc:
        raise download_error(where, exc) from None
    if re.fullmatch(r"[0-9a-f]{64}", etag) and hash_file(partial) != etag:
        partial.unlink()
        raise ModelFileError(f"{where}: the download is corrupt (checksum)")
    os.replace(partial, blob)


def _link_snapshot(storage: Path, blob: Path, commit: str, revision: str, filename: str) -> Path:
    """`snapshots/<commit>/<file>` pointing at the blob, and `refs/<revision>` naming the
    commit: how the hub's cache finds a file by revision."""
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


def _cached_projector(repo: str, model: Path) -> Path | None:
    """The projector complete beside `model` in its cache snapshot, picked by the rule that
    chose it for download (no request at all)."""
    snapshots = _repo_cache(repo) / "snapshots"
    snapshot = snapshots / model.relative_to(snapshots).parts[0]
    files = [
        path.relative_to(snapshot).as_posix()
        for path in snapshot.rglob("*")
        if is_projector_name(path.name) and path.is_file()  # not a blob still downloading
    ]
    name = pick_repo_projector(files, model.relative_to(snapshot).as_posix())
    return None if name is None else snapshot / name


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
