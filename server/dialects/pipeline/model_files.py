"""The models the listing endpoints name (/v1/models, /api/tags) and their GGUF facts.

Shared by the OpenAI and Ollama routes: which models are listed (every model of --modeldir,
else the one served), and a model file's header and SHA-256 read off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from fastapi import Request

from server.dialects.pipeline.model_choice import ModelChoice
from server.models.gguf import GGUFFormatError, GGUFSummary, file_sha256, gguf_summary

logger = logging.getLogger(__name__)


def listed_models(request: Request) -> list[tuple[str, Path | None]]:
    """(name, file) of each listed model: every model of --modeldir, else the served one."""
    choice: ModelChoice = request.app.state.model_choice
    return choice.listed()


def public_models(request: Request) -> list[tuple[str, Path | None]]:
    """listed_models under the names clients see: the served model's first --alias."""
    choice: ModelChoice = request.app.state.model_choice
    return [(choice.public_name(name), path) for name, path in choice.listed()]


async def read_model_file(path: Path | None, with_digest: bool) -> tuple[GGUFSummary, str] | None:
    """A GGUF's header (and SHA-256; "" without `with_digest`), read off the event loop: the
    first digest hashes the whole file, later ones come from the cache. None for a scripted
    engine (no file) or a file that can no longer be read."""
    if path is None:
        return None
    try:
        return await asyncio.to_thread(_read, path, with_digest)
    except (OSError, GGUFFormatError) as exc:
        logger.warning("Cannot describe the model file %s: %s", path, exc)
        return None


def _read(path: Path, with_digest: bool) -> tuple[GGUFSummary, str]:
    return gguf_summary(path), file_sha256(path) if with_digest else ""
