"""The models a server can serve: the one it started with, every GGUF in `--modeldir` (and
`--admindir`), and the models downloaded into the Hugging Face cache; each with its GGUF header.

Names are what `/v1/models`, `/api/tags` and KoboldCpp's `/api/admin/list_options` list (a
file's KoboldCpp display name; Ollama's `hf.co/owner/repo:QUANT` for a downloaded model), and
`resolve` is the rule a request's `model` field follows. Broken files are reported (path and
reason) and skipped, never fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from server.gguf_metadata import GGUFFormatError, GGUFSummary, gguf_summary
from server.model_file import SPLIT_PART, model_display_name

logger = logging.getLogger("hearth")


@dataclass(frozen=True)
class CatalogEntry:
    name: str  # KoboldCpp's display name: the file stem without characters outside [\w.-]
    path: Path
    summary: GGUFSummary


@dataclass
class ModelCatalog:
    entries: list[CatalogEntry] = field(default_factory=list)
    problems: list[tuple[Path, str]] = field(default_factory=list)
    has_model_dir: bool = False
    default: str | None = None  # --defaultmodel: serves names that match no entry

    @classmethod
    def scan(
        cls,
        served: Path,
        model_dir: Path | None = None,
        downloaded: Iterable[tuple[str, Path]] = (),
        default: str | None = None,
        admin_dir: Path | None = None,
    ) -> ModelCatalog:
        """`downloaded`: (name, file) of the models in the hub cache, listed with a folder."""
        folders = [folder for folder in (model_dir, admin_dir) if folder is not None]
        catalog = cls(has_model_dir=bool(folders), default=default)
        candidates: list[tuple[str | None, Path]] = [(None, served)]
        for folder in folders:
            candidates += [(None, path) for path in sorted(folder.rglob("*.gguf"))]
        if folders:
            candidates += list(downloaded)
        seen: set[Path] = set()
        for name, path in candidates:
            real = path.resolve()
            if real in seen or _is_later_split_part(path) or "mmproj" in path.name.lower():
                continue
            seen.add(real)
            catalog.add(path, name)
        return catalog

    def add(self, path: Path, name: str | None = None) -> CatalogEntry | None:
        """List one more model (None: it could not be read, and is reported)."""
        try:
            summary = gguf_summary(path)
        except (GGUFFormatError, OSError) as exc:
            reason = str(exc) if isinstance(exc, GGUFFormatError) else exc.strerror or str(exc)
            self.problems.append((path, reason))
            logger.warning("Skipping %s: %s", path, reason)
            return None
        name = name or model_display_name(path)
        taken = {entry.name for entry in self.entries}
        suffix = 2
        unique = name
        while unique in taken:  # two files with one stem in different folders
            unique = f"{name}-{suffix}"
            suffix += 1
        entry = CatalogEntry(unique, path, summary)
        self.entries.append(entry)
        return entry

    @property
    def names(self) -> list[str]:
        return [entry.name for entry in self.entries]

    def resolve(self, requested: str | None) -> CatalogEntry | None:
        """The entry a request's `model` names, by the rules clients rely on.

        Without a model dir every name (and none) is the served model, as KoboldCpp and
        llama-server do: clients often send a fixed name. With one, a name is matched without
        case, a `.gguf` suffix or Ollama's `:latest` tag; no name means the served model; an
        unknown name is `--defaultmodel`'s entry, or None (the dialect's 404). (A request
        without a name goes to the loaded model: the API asks with that model's name.)"""
        if not self.entries:
            return None
        served = self.entries[0]
        if requested is None or not requested.strip():
            fallback = self.resolve(self.default) if self.default is not None else None
            return fallback or served
        if not self.has_model_dir:
            return served
        exact = requested.strip().lower().removesuffix(":latest")
        for entry in self.entries:
            if entry.name.lower() == exact:  # hub names: hf.co/owner/repo:QUANT
                return entry
        wanted = _normal(requested)
        for entry in self.entries:
            if _normal(entry.name) == wanted or _normal(entry.path.name) == wanted:
                return entry
        if self.default is not None and _normal(self.default) != wanted:
            return self.resolve(self.default)
        return None


def _normal(name: str) -> str:
    text = name.strip().lower().removesuffix(":latest").removesuffix(".gguf")
    return model_display_name(Path(text + ".gguf")).lower()


def _is_later_split_part(path: Path) -> bool:
    """`-00002-of-00003.gguf` and later: llama.cpp loads a split model from its first part."""
    part = SPLIT_PART.search(path.name)
    return part is not None and int(part.group(1)) > 1
