"""A --modeldir folder for the model-switching tests: the bundled model's weights again under
another name (a hard link when the file system allows, else a copy), and a broken file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SERVED = "gemma-3-270m-q4_k_m"  # the bundled model's name as Hearth serves it
OTHER = "story-writer"  # the same weights under another name, in the folder


def make_model_folder(folder: Path, bundled: Path) -> Path:
    """`folder` with OTHER.gguf (the bundled weights) and broken.gguf (not a model)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:  # the same weights under another name: a hard link, no copy
        os.link(bundled, folder / f"{OTHER}.gguf")
    except OSError:
        shutil.copyfile(bundled, folder / f"{OTHER}.gguf")
    (folder / "broken.gguf").write_bytes(b"not a model")
    return folder
