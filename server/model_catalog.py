"""The models a server can serve: the one it started with, every GGUF in `--modeldir`, and the
models downloaded into the Hugging Face cache; each with its GGUF header.

Work in progress for issue 12's model switching: names are what `/v1/models`, `/api/tags` and
KoboldCpp's `/api/admin/list_options` will list, and `resolve` is the rule a request's `model`
field will follow. Broken files are reported (path and reason) and skipped, never fatal.
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
        downloaded: Iterable[Path] = (),
        default: str | None = None,
    ) -> ModelCatalog:
        catalog = cls(has_model_dir=model_dir is not None, default=default)
        candidates = [served]
        if model_dir is not None:
            candidates += sorted(model_dir.rglob("*.gguf"))
        candidates += list(downloaded)
        seen: set[Path] = set()
        for path in candidates:
            real = path.resolve()
            if real in seen or _is_later_split_part(path) or "mmproj" in path.name.lower():
                continue
            seen.add(real)
            catalog._add(path)
        return catalog

    def _add(self, path: Path) -> None:
        try:
            summary = gguf_summary(path)
        except (GGUFFormatError, OSError) as exc:
            reason = str(exc) if isinstance(exc, GGUFFormatError) else exc.strerror or str(exc)
            self.problems.append((path, reason))
            logger.warning("Skipping %s: %s", path, reason)
            return
        name = model_display_name(path)
        taken = {entry.name for entry in self.entries}
        suffix = 2
        unique = name
        while unique in taken:  # two files with one stem in different folders
            unique = f"{name}-{suffix}"
            suffix += 1
        self.entries.append(CatalogEntry(unique, path, summary))

    @property
    def names(self) -> list[str]:
        return [entry.name for entry in self.entries]

    def resolve(self, requested: str | None) -> CatalogEntry | None:
        """The entry a request's `model` names, by the rules clients rely on.

        Without a model dir every name (and none) is the served model, as KoboldCpp and
        llama-server do: clients often send a fixed name. With one, a name is matched without
        case, a `.gguf` suffix or Ollama's `:latest` tag; no name means the served model; an
        unknown name is `--defaultmodel`'s entry, or None (the dialect's 404)."""
        if not self.entries:
            return None
        served = self.entries[0]
        if requested is None or not requested.strip() or not self.has_model_dir:
            return served
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
