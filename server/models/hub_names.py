"""How a Hugging Face model is named, and which of a repository's files a quantization is.

- `owner/repo[:QUANT]` (llama-server's `--hf`; Ollama writes `hf.co/owner/repo:QUANT`): the
  repository and the quantization (default Q4_K_M).
- `https://huggingface.co/<repo>/resolve/<rev>/<file>.gguf` (a model URL): one file.
- `hf.co/owner/repo:QUANT`: Ollama's name for a model file downloaded from the Hub.

Pure text work: no request, no file is read.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from server.models.files import SPLIT_PART, ModelFileError, model_display_name

DEFAULT_QUANT = "Q4_K_M"
_HUB_HOSTS = {"huggingface.co", "hf.co", "www.huggingface.co"}
_QUANT_NAME = re.compile(r"(?<![A-Z0-9])(I?Q\d[\w]*?|F16|BF16|F32)(?=[-.]|$)")


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
    """The quantization names in a GGUF file's name ("Q4_K_M", "F16", …); [] for other files."""
    if not name.lower().endswith(".gguf"):
        return []
    found = _QUANT_NAME.findall(Path(name).name.upper())
    return [quant.rstrip("_") for quant in found]


def hub_model_name(repo: str, path: Path) -> str:
    """Ollama's name for a model file from the hub: `hf.co/owner/repo:QUANT`."""
    quants = quants_in(path.name)
    return f"hf.co/{repo}:{quants[-1] if quants else model_display_name(path)}"
