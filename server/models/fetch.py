"""Models from the network: `--hf owner/repo[:QUANT]` and `--model <URL>`, downloaded once.

- `--hf owner/repo[:QUANT]` (llama-server's convention): the repository's GGUF file of that
  quantization (default Q4_K_M; a split model's parts all come down, the first is loaded),
  and, unless `--mmproj` or `--no-mmproj` is given, the repository's multimodal projector
  (mmproj) with it, as llama-server's `-hf` picks it (server/models/projector_files.py).
- `--model https://huggingface.co/<repo>/resolve/<rev>/<file>.gguf` (KoboldCpp accepts model
  URLs): that file.
Both go into huggingface_hub's standard cache (server/models/hub_files.py), so `HF_ENDPOINT`,
`HF_TOKEN` and `HF_HUB_CACHE` apply and an interrupted download resumes. Any other http(s) URL
is fetched by a small resumable downloader (HTTP ranges) into Hearth's cache folder
(server/models/download.py). A file already complete in a cache is used without any request,
so a second start works offline.

Progress goes to the console as lines ("Downloading: 40% (96/241 MB, 52.1 MB/s, 3 s left)");
every failure is one `ModelFileError` sentence, never a traceback.

This module is the front door: `model_files_for` (`model_for` for the model alone) and,
re-exported, the names the dialects, the launcher and the process use (the work is in
`hub_names`, `hub_request`, `hub_files` and `download`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from server.models.download import ConsoleProgress, DownloadCancelled, Progress, fetch_url
from server.models.files import resolve_model_path
from server.models.hub_files import (
    Announce,
    HubModel,
    delete_hub_model,
    downloaded_models,
    fetch_hub_file,
    fetch_hub_model,
    pull_hub_model,
)
from server.models.hub_names import (
    DEFAULT_QUANT,
    hub_model_name,
    parse_hf_spec,
    parse_hub_url,
    pick_quant_file,
    quants_in,
)
from server.models.hub_request import hub_call
from server.settings.config import HearthSettings

__all__ = [
    "DEFAULT_QUANT",
    "Announce",
    "ConsoleProgress",
    "DownloadCancelled",
    "HubModel",
    "ModelFiles",
    "Progress",
    "delete_hub_model",
    "downloaded_models",
    "fetch_hub_file",
    "fetch_hub_model",
    "fetch_url",
    "hub_call",
    "hub_model_name",
    "model_files_for",
    "model_for",
    "parse_hf_spec",
    "parse_hub_url",
    "pick_quant_file",
    "pull_hub_model",
    "quants_in",
]


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model: Path  # the GGUF to load
    projector: Path | None = None  # the repository's projector, fetched with `--hf`


def model_for(settings: HearthSettings, progress: Progress | None = None) -> Path:
    """The local GGUF to load for these settings, downloading it first when it is remote."""
    return model_files_for(settings, progress).model


def model_files_for(settings: HearthSettings, progress: Progress | None = None) -> ModelFiles:
    """The local GGUF to load for these settings, downloading it first when it is remote; with
    `--hf`, the repository's projector too (none with `--mmproj` or `--no-mmproj`)."""
    report = progress or ConsoleProgress()
    if settings.hf:
        repo, quant = parse_hf_spec(settings.hf)
        wanted = not settings.mmproj and not settings.no_mmproj
        # Its own progress on the console: a line's speed and time left are the file's.
        projector_report = (progress or ConsoleProgress()) if wanted else None
        found = fetch_hub_model(repo, quant, report, projector_report)
        return ModelFiles(found.path, found.projector)
    reference = settings.model_param
    if reference and urlparse(reference).scheme in ("http", "https"):
        hub_file = parse_hub_url(reference)
        if hub_file is not None:
            return ModelFiles(fetch_hub_file(*hub_file, report))
        return ModelFiles(fetch_url(reference, report))
    return ModelFiles(resolve_model_path(reference))
