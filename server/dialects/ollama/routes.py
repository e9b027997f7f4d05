"""Ollama endpoints: /api/generate and /api/chat (NDJSON streams by default), /api/tags,
/api/show, /api/version, /api/ps, and /api/pull and /api/delete for Hugging Face models.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from server import __version__
from server.core.text.reasoning import thinking_syntax
from server.dialects.edge.deps import ModelInfoDep, SchedulerDep
from server.dialects.edge.errors import APIError, Dialect, ErrorKind
from server.dialects.ollama import adapter, formatter
from server.dialects.ollama.pull import pull_progress, pullable
from server.dialects.ollama.schemas import (
    ChatChunk,
    GenerateChunk,
    ModelShow,
    ModelTags,
    OllamaChatRequest,
    OllamaDeleteRequest,
    OllamaGenerateRequest,
    OllamaPullRequest,
    OllamaShowRequest,
    OllamaVersion,
    PullProgress,
    RunningModel,
    RunningModels,
)
from server.dialects.pipeline.model_choice import ModelChoice
from server.dialects.pipeline.model_files import listed_models, read_model_file
from server.dialects.pipeline.routing import Generation, Served, generation_route, json_route
from server.models.fetch import delete_hub_model
from server.models.files import ModelFileError
from server.models.gguf import rfc3339

router = APIRouter(tags=["Ollama"])
OLLAMA = Dialect.OLLAMA
OLLAMA_COMPAT_VERSION = "0.7.0"  # what KoboldCpp reports; clients only display it
# Ollama turns a negative keep_alive ("never unload") into Go's longest duration,
# math.MaxInt64 nanoseconds (api.Duration.UnmarshalJSON), and /api/ps reports
# expires_at = now + that duration (server/sched.go, PsHandler): about 292 years ahead, which
# `ollama ps` shows as "Forever". Hearth keeps a model loaded until another replaces it unless
# a request's keep_alive says otherwise, so that is what it sends for "no deadline".
NEVER_UNLOADS = timedelta(microseconds=(2**63 - 1) // 1000)
# What this server can do with any model: generate and chat, and tool calls (grammar-bound,
# or the model's own format with --jinjatools). No images, insert or thinking. Embeddings work
# (/api/embed) but are not listed: Ollama lists "embedding" for embedding-only models.
CAPABILITIES = ("completion", "tools")
logger = logging.getLogger(__name__)


@generation_route(router, "/api/generate", OllamaGenerateRequest, GenerateChunk, OLLAMA)
def generate(body: OllamaGenerateRequest, served: Served) -> Generation:
    wire = formatter.GenerateWire(body.model)
    if not body.prompt:  # Ollama's way to load (or, with keep_alive 0, unload) a model
        return Generation(adapter.load_plan(body, "gen-"), wire, False, wire.loaded)
    plan = adapter.generate_plan(body, served.chat_options("gen-"))
    return Generation(adapter.keeping_alive(plan, body), wire, body.stream)


@generation_route(router, "/api/chat", OllamaChatRequest, ChatChunk, OLLAMA)
def chat(body: OllamaChatRequest, served: Served) -> Generation:
    wire = formatter.ChatWire(body.model)
    if not body.messages:
        return Generation(adapter.load_plan(body, "chat-"), wire, False, wire.loaded)
    plan = adapter.chat_plan(body, served.chat_options("chat-"))
    return Generation(adapter.keeping_alive(plan, body), wire, body.stream)


@router.get("/api/tags")
async def tags(request: Request, model: ModelInfoDep) -> ModelTags:
    return {
        "models": [
            formatter.model_entry(name, model.context_size, await read_model_file(path, True))
            for name, path in listed_models(request)
        ]
    }


@router.get("/api/ps")
async def running_models(
    request: Request, scheduler: SchedulerDep, model: ModelInfoDep
) -> RunningModels:
    """The loaded models, each with when its keep_alive unloads it."""
    snapshot = scheduler.snapshot()
    paths = dict(listed_models(request))
    running: list[RunningModel] = []
    for name, unloads_in in zip(snapshot.loaded_models, snapshot.unloads_in, strict=False):
        file = await read_model_file(paths.get(name), with_digest=True)
        entry = formatter.model_entry(name, model.context_size, file)
        never = unloads_in >= NEVER_UNLOADS.total_seconds()
        stays = NEVER_UNLOADS if never else timedelta(seconds=unloads_in)
        # size: the model file (Ollama reports its memory estimate); all of it is in RAM on CPU.
        running.append({**entry, "expires_at": rfc3339(datetime.now(UTC) + stays), "size_vram": 0})
    return {"models": running}


@json_route(router, "/api/show", OllamaShowRequest, OLLAMA, key=False, optional=True)
async def show(body: OllamaShowRequest, served: Served) -> ModelShow:
    """The model the body names (by the catalog's rules), with its own GGUF facts."""
    choice: ModelChoice = served.request.app.state.model_choice
    serving = served.scheduler.snapshot().serving
    name, path = choice.named(body.model or body.name, OLLAMA, serving)
    file = await read_model_file(path, with_digest=False)
    summary = file[0] if file else None
    return {
        "modelfile": f"FROM {name}",
        "parameters": f"num_ctx {served.model.context_size}",
        "template": (summary.chat_template or "") if summary else "",
        "details": formatter.details(summary),
        "model_info": formatter.model_info(summary),
        "capabilities": capabilities(
            summary.chat_template if summary else None, choice.modalities.get(path, frozenset())
        )
        if path is not None
        else capabilities(None, served.model.modalities),
        "modified_at": rfc3339(summary.modified_at) if summary else None,
    }


def capabilities(template: str | None, modalities: frozenset[str] = frozenset()) -> list[str]:
    """Ollama's list; "thinking" when the model's template shows it thinks (as Ollama reads
    a template: server/core/reasoning.thinking_syntax); "vision" (and "audio") when its
    projector takes images (sounds), as Ollama names them."""
    names = [*CAPABILITIES, *(["thinking"] if thinking_syntax(template) else [])]
    return names + [kind for kind in ("vision", "audio") if kind in modalities]


@json_route(router, "/api/pull", OllamaPullRequest, OLLAMA)
async def pull(body: OllamaPullRequest, served: Served) -> Response:
    """Download `hf.co/owner/repo[:QUANT]` into the Hugging Face cache, with Ollama's progress
    lines (or one answer with "stream": false)."""
    name = _model_name(body.model, body.name)
    if not pullable(name):
        raise APIError(
            400,
            f"{name}: Hearth pulls models from Hugging Face only: hf.co/owner/repo[:QUANT]",
            dialect=OLLAMA,
        )
    state = served.request.app.state
    lines = pull_progress(name, state.pull_locks, state.model_choice.add)
    if body.stream:

        async def ndjson() -> AsyncIterator[str]:
            async for item in lines:
                line = item if isinstance(item, dict) else {"error": item}
                yield json.dumps(line) + "\n"

        return StreamingResponse(ndjson(), media_type="application/x-ndjson")
    last: PullProgress | str | None = None
    async for item in lines:
        last = item
    if isinstance(last, str):
        raise APIError(_pull_failure_status(last), last, ErrorKind.NOT_FOUND, OLLAMA)
    return JSONResponse({"status": "success"})


@json_route(router, "/api/delete", OllamaDeleteRequest, OLLAMA, methods=["DELETE"])
async def delete(body: OllamaDeleteRequest, served: Served) -> Response:
    """Remove a pulled `hf.co/…` model's files from the cache: never those of a loaded model or
    of the model the server started with (it serves requests that name none)."""
    name = _model_name(body.model, body.name)
    removed = []
    if pullable(name):
        snapshot = served.scheduler.snapshot()
        paths = dict(listed_models(served.request))
        in_use = [snapshot.loading_model, *snapshot.loaded_models]
        keep = [served.model.path, *(paths.get(loaded) for loaded in in_use if loaded is not None)]
        kept = [path for path in keep if path is not None]
        try:
            removed = await asyncio.to_thread(delete_hub_model, name, kept)
        except ModelFileError as exc:
            raise APIError(400, str(exc), dialect=OLLAMA) from None
    if not removed:
        raise APIError(404, f"model '{name}' not found", ErrorKind.NOT_FOUND, OLLAMA)
    choice: ModelChoice = served.request.app.state.model_choice
    choice.forget(removed[0])
    return Response(status_code=200)


def _model_name(model: str | None, name: str | None) -> str:
    chosen = (model or name or "").strip()
    if not chosen:
        raise APIError(400, "model is required", dialect=OLLAMA)
    return chosen


def _pull_failure_status(message: str) -> int:
    if "is gated" in message:
        return 403
    if "no such" in message or " has no " in message:
        return 404
    return 502  # the hub could not be reached or answered badly: not the request's fault


@router.get("/api/version")
async def version() -> OllamaVersion:
    return {"version": OLLAMA_COMPAT_VERSION, "hearth": __version__}
