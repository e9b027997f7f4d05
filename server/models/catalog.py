"""The models a server can serve: the one it started with, every GGUF in `--modeldir` (and
`--admindir`), and the models downloaded into the Hugging Face cache; each with its GGUF header
and, when it has one, its multimodal projector: the served model's as the start chose it, every
other model's the one beside it in its folder (server/models/projector_files.py).

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

from server.models.files import is_later_split_part, model_display_name
from server.models.gguf import GGUFFormatError, GGUFSummary, gguf_summary
from server.models.projector_files import (
    PairedProjector,
    is_projector_name,
    projector_beside,
    read_projector,
)

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
    # --modeldir given: a name that matches no entry is not found (without: the loaded model)
    has_model_dir: bool = False
    lists_downloads: bool = False  # a model folder (or admin's): hub-cache models are listed
    default: str | None = None  # --defaultmodel: serves names that match no entry
    # Other names of listed files (a hub name of the served file): lower-case → entry name
    aliases: dict[str, str] = field(default_factory=dict)
    # Each listed model's projector, by the model file's resolved path (none: text only)
    projectors: dict[Path, PairedProjector] = field(default_factory=dict)

    @classmethod
    def scan(
        cls,
        served: Path,
        model_dir: Path | None = None,
        downloaded: Iterable[tuple[str, Path]] = (),
        default: str | None = None,
        admin_dir: Path | None = None,
        served_projector: Path | None = None,
        pair_projectors: bool = True,
    ) -> ModelCatalog:
        """`downloaded`: (name, file) of the models in the hub cache, listed with a folder.
        `served_projector`: the served model's projector (the start chose it); every other
        model gets the one beside it unless `pair_projectors` is off (--no-mmproj)."""
        folders = [folder for folder in (model_dir, admin_dir) if folder is not None]
        catalog = cls(
            has_model_dir=model_dir is not None, lists_downloads=bool(folders), default=default
        )
        served_entry = catalog.add(served)
        if served_entry is not None and served_projector is not None:
            paired = read_projector(served_projector)
            catalog.projectors[served.resolve()] = paired or PairedProjector(served_projector, ())
        candidates: list[tuple[str | None, Path]] = []
        for folder in folders:
            candidates += [(None, path) for path in sorted(folder.rglob("*.gguf"))]
        if folders:
            candidates += list(downloaded)
        read: dict[Path, PairedProjector | None] = {}
        for name, path in candidates:
            if is_later_split_part(path) or is_projector_name(path.name):
                continue
            entry = catalog.add(path, name)
            if entry is None or entry is served_entry or not pair_projectors:
                continue
            key = entry.path.resolve()
            if key not in catalog.projectors and (paired := projector_beside(path, read)):
                catalog.projectors[key] = paired
        return catalog

    def projector_of(self, path: Path) -> PairedProjector | None:
        """The projector of the listed model file `path` (None: it serves text only)."""
        return self.projectors.get(path.resolve())

    def projector_for(self, path: Path) -> Path | None:
        paired = self.projector_of(path)
        return None if paired is None else paired.path

    def add(self, path: Path, name: str | None = None) -> CatalogEntry | None:
        """List one more model (None: it could not be read, and is reported). A file already
        listed is not listed twice: `name` becomes another name of its entry."""
        real = path.resolve()
        for listed in self.entries:
            if listed.path.resolve() == real:
                if name is not None and name != listed.name:
                    self.aliases[name.lower()] = listed.name
                return listed
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

    def resolve(self, requested: str | None, loaded: str | None = None) -> CatalogEntry | None:
        """The entry a request's `model` names, by the rules clients rely on; `loaded` is the
        model serving now.

        A name is matched without case, a `.gguf` suffix or Ollama's `:latest` tag. No name:
        the loaded model (none loaded: `--defaultmodel`, else the first listed). A name that
        matches nothing: with --modeldir, `--defaultmodel`'s entry or None (the dialect's 404);
        without, the loaded model, as KoboldCpp and llama-server do (clients often send a
        fixed name)."""
        if not self.entries:
            return None
        current = self._match(loaded) if loaded else None
        first = self.entries[0]
        if requested is None or not requested.strip():
            default = self._match(self.default) if self.default is not None else None
            return current or default or first
        found = self._match(requested)
        if found is not None:
            return found
        if not self.has_model_dir:
            return current or first
        return self._match(self.default) if self.default is not None else None

    def _match(self, name: str) -> CatalogEntry | None:
        exact = name.strip().lower().removesuffix(":latest")
        exact = self.aliases.get(exact, exact).lower()
        for entry in self.entries:
            if entry.name.lower() == exact:  # hub names: hf.co/owner/repo:QUANT
                return entry
        wanted = _normal(name)
        for entry in self.entries:
            if _normal(entry.name) == wanted or _normal(entry.path.name) == wanted:
                return entry
        return None


def _normal(name: str) -> str:
    text = name.strip().lower().removesuffix(":latest").removesuffix(".gguf")
    return model_display_name(Path(text + ".gguf")).lower()
