"""Which multimodal projector (an mmproj GGUF) goes with which model, found without loading
anything:

- `--hf owner/repo[:QUANT]`: the repository's projector, chosen as llama-server's `-hf` chooses
  it (llama.cpp common/download.cpp, `find_best_mmproj`): a `*mmproj*.gguf` in the model's
  folder or one above it, the deepest first, then the one whose quantization is closest to the
  model's (a Q4_K_M model gets mmproj-Q8_0 over mmproj-F16), then the first by name.
- `--modeldir`: the projector beside a model, in the same folder: the one whose name (without
  "mmproj") starts with the most words of the model's name. A projector whose name starts
  like no model of its folder (`mmproj-F16.gguf`, `mmproj-model-f16.gguf`: the usual names in
  a folder per model) serves every model there without one of its own; among equals, the
  quantization closest to the model's, as above. A file that is not a projector is skipped
  with a warning.

What a projector takes ("vision", "audio") comes from its header (projector_header.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from server.models.files import is_later_split_part
from server.models.gguf import GGUFFormatError, gguf_summary
from server.models.projector_header import projector_facts

logger = logging.getLogger("hearth")

_SPLIT = re.compile(r"^(.+)-(\d{5})-of-(\d{5})$", re.IGNORECASE)
_TAG = re.compile(r"[-.]([A-Za-z0-9_]+)$")  # llama.cpp's quantization tag: the last word
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class PairedProjector:
    path: Path
    modalities: tuple[str, ...]  # "vision", "audio", from its header

    @property
    def takes(self) -> str:
        return " and ".join(self.modalities) or "nothing it says"


def is_projector_name(name: str) -> bool:
    """A projector's file name, as llama.cpp and the Hub name them (any case here)."""
    lower = Path(name).name.lower()
    return lower.endswith(".gguf") and "mmproj" in lower


def quant_bits(name: str) -> int:
    """The bits of the quantization a GGUF's name ends with, as llama.cpp reads them
    (`extract_quant_bits`): Q4_K_M → 4, Q8_0 → 8, F16 and BF16 → 16, F32 → 32; 0 when the
    name has none."""
    stem = Path(name).name
    stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
    split = _SPLIT.match(stem)
    if split is not None:
        stem = split.group(1)
    tag = _TAG.search(stem)
    digits = re.search(r"\d+", tag.group(1)) if tag else None
    return int(digits.group()) if digits else 0


def pick_repo_projector(files: Iterable[str], model: str) -> str | None:
    """The projector llama-server's `-hf` takes with `model` from a repository's file list
    (paths relative to the repository); None when it has none."""
    model_dirs = model.split("/")[:-1]
    bits = quant_bits(model)
    best: str | None = None
    best_key: tuple[int, int] | None = None
    for name in sorted(files):
        parts = name.split("/")
        dirs = parts[:-1]
        if not is_projector_name(parts[-1]) or dirs != model_dirs[: len(dirs)]:
            continue  # not a projector, or not in the model's folder nor one above it
        key = (-len(dirs), abs(quant_bits(name) - bits))
        if best_key is None or key < best_key:
            best, best_key = name, key
    return best


def pick_neighbour(model: str, projectors: Sequence[str], models: Sequence[str]) -> str | None:
    """The projector (of `projectors`, file names in one folder) for the model file `model`;
    `models`: every model file name in that folder. None: the model serves text only."""
    own = _words(model)
    shared = {name: _shared_start(own, _words(name, projector=True)) for name in projectors}
    most = max(shared.values(), default=0)
    if most > 0:
        candidates = [name for name in projectors if shared[name] == most]
    else:  # none is named after this model: one named after no model of the folder serves it
        others = [_words(name) for name in models]
        candidates = [
            name
            for name in projectors
            if all(_shared_start(words, _words(name, projector=True)) == 0 for words in others)
        ]
    bits = quant_bits(model)
    return min(sorted(candidates), key=lambda name: abs(quant_bits(name) - bits), default=None)


def read_projector(path: Path) -> PairedProjector | None:
    """A projector's facts from its header; None (and a warning) when the file cannot be read
    or is not a projector."""
    try:
        facts = projector_facts(gguf_summary(path).metadata)
    except (GGUFFormatError, OSError) as exc:
        reason = str(exc) if isinstance(exc, GGUFFormatError) else exc.strerror or str(exc)
        logger.warning("Skipping the projector %s: %s", path, reason)
        return None
    if facts is None:
        logger.warning("Skipping the projector %s: not a projector (no clip.* keys)", path)
        return None
    return PairedProjector(path, facts.modalities)


def projector_beside(
    model: Path, known: MutableMapping[Path, PairedProjector | None] | None = None
) -> PairedProjector | None:
    """The projector in `model`'s folder that goes with it (`pick_neighbour`), or None.
    `known`: projectors already read, by path (a folder's files are read once per scan)."""
    seen = known if known is not None else {}
    try:
        files = sorted(
            path for path in model.parent.iterdir() if path.name.lower().endswith(".gguf")
        )
    except OSError:
        return None
    projectors = [path for path in files if is_projector_name(path.name)]
    readable: dict[str, PairedProjector] = {}
    for path in projectors:
        if path not in seen:
            seen[path] = read_projector(path)
        found = seen[path]
        if found is not None:
            readable[path.name] = found
    models = [
        path.name
        for path in files
        if not is_projector_name(path.name) and not is_later_split_part(path)
    ]
    chosen = pick_neighbour(model.name, list(readable), models)
    return None if chosen is None else readable[chosen]


def _words(name: str, projector: bool = False) -> list[str]:
    stem = Path(name).name.lower().removesuffix(".gguf")
    return _WORD.findall(stem.replace("mmproj", " ") if projector else stem)


def _shared_start(first: list[str], second: list[str]) -> int:
    count = 0
    for one, other in zip(first, second, strict=False):
        if one != other:
            break
        count += 1
    return count
