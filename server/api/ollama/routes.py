"""Ollama endpoints: /api/generate and /api/chat (NDJSON streams by default), /api/tags,
/api/show, /api/version, /api/ps.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi import APIRouter, Request

from server import __version__
from server.api.deps import ModelInfo, ModelInfoDep
from server.api.errors import Dialect, parse_json_body
from server.api.ollama import adapter, formatter
from server.api.ollama.schemas import (
    ChatChunk,
    GenerateChunk,
    ModelShow,
    ModelTags,
    OllamaChatRequest,
    OllamaGenerateRequest,
    OllamaShowRequest,
    OllamaVersion,
    RunningModel,
    RunningModels,
)
from server.api.openapi import json_body
from server.api.respond import Generation, Served, generation_route
from server.gguf_metadata import GGUFFormatError, GGUFSummary, file_sha256, gguf_summary, rfc3339

router = APIRouter(tags=["Ollama"])
OLLAMA = Dialect.OLLAMA
OLLAMA_COMPAT_VERSION = "0.7.0"  # what KoboldCpp reports; clients only display it
# Ollama turns a negative keep_alive ("never unload") into Go's longest duration,
# math.MaxInt64 nanoseconds (api.Duration.UnmarshalJSON), and /api/ps reports
# expires_at = now + that duration (server/sched.go, PsHandler): about 292 years ahead, which
# `ollama ps` shows as "Forever". Hearth keeps its one model loaded until it stops, which is
# exactly that case, so it sends the same instead of an invented date.
NEVER_UNLOADS = timedelta(microseconds=(2**63 - 1) // 1000)
# What this server can do with any model: generate and chat, and tool calls (grammar-bound,
# or the model's own format with --jinjatools). No embeddings, images, insert or thinking.
CAPABILITIES = ("completion", "tools")
logger = logging.getLogger(__name__)


@generation_route(router, "/api/generate", OllamaGenerateRequest, GenerateChunk, OLLAMA)
def generate(body: OllamaGenerateRequest, served: Served) -> Generation:
    plan = adapter.generate_plan(body, served.chat_options("gen-"))
    return Generation(plan, formatter.GenerateWire(body.model), body.stream)


@generation_route(router, "/api/chat", OllamaChatRequest, ChatChunk, OLLAMA)
def chat(body: OllamaChatRequest, served: Served) -> Generation:
    plan = adapter.chat_plan(body, served.chat_options("chat-"))
    return Generation(plan, formatter.ChatWire(body.model), body.stream)


async def _model_file(model: ModelInfo, with_digest: bool) -> tuple[GGUFSummary, str] | None:
    """The loaded GGUF's header (and SHA-256), read off the event loop: the first digest hashes
    the whole file, later ones come from the cache. None for a scripted engine or a file that
    can no longer be read."""
    if model.path is None:
        return None
    try:
        return await asyncio.to_thread(_read_model_file, model.path, with_digest)
    except (OSError, GGUFFormatError) as exc:
        logger.warning("Cannot describe the model file %s: %s", model.path, exc)
        return None


def _read_model_file(path: Path, with_digest: bool) -> tuple[GGUFSummary, str]:
    return gguf_summary(path), file_sha256(path) if with_digest else ""


@router.get("/api/tags")
async def tags(model: ModelInfoDep) -> ModelTags:
    file = await _model_file(model, with_digest=True)
    return {"models": [formatter.model_entry(model.name, model.context_size, file)]}


@router.get("/api/ps")
async def running_models(model: ModelInfoDep) -> RunningModels:
    file = await _model_file(model, with_digest=True)
    entry = formatter.model_entry(model.name, model.context_size, file)
    expires_at = rfc3339(datetime.now(UTC) + NEVER_UNLOADS)
    # size: the model file (Ollama reports its memory estimate); all of it is in RAM on CPU.
    running: RunningModel = {**entry, "expires_at": expires_at, "size_vram": 0}
    return {"models": [running]}


@router.post("/api/show", openapi_extra=json_body(OllamaShowRequest, required=False))
async def show(request: Request, model: ModelInfoDep) -> ModelShow:
    await parse_json_body(request, OllamaShowRequest, Dialect.OLLAMA, optional=True)
    file = await _model_file(model, with_digest=False)
    summary = file[0] if file else None
    return {
        "modelfile": f"FROM {model.name}",
        "parameters": f"num_ctx {model.context_size}",
        "template": (summary.chat_template or "") if summary else "",
        "details": formatter.details(summary),
        "model_info": formatter.model_info(summary),
        "capabilities": list(CAPABILITIES),
        "modified_at": rfc3339(summary.modified_at) if summary else None,
    }


@router.get("/api/version")
async def version() -> OllamaVersion:
    return {"version": OLLAMA_COMPAT_VERSION, "hearth": __version__}
