"""Ollama endpoints: /api/generate and /api/chat (NDJSON streams by default), /api/tags,
/api/show, /api/version, /api/ps.

NDJSON has no comment lines: ollama-python parses every line, so keep-alives during a buffered
tool call are ordinary empty-content chunks, and a failure mid-stream is an `{"error": ...}`
line (which the client raises as ResponseError).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from server import __version__
from server.api import common
from server.api.deps import ModelInfo, ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.api.errors import Dialect, parse_json_body
from server.api.ollama import adapter
from server.api.ollama.schemas import OllamaChatRequest, OllamaGenerateRequest, OllamaShowRequest
from server.api.openapi import json_body
from server.core.scheduler import Job, Scheduler
from server.core.tool_stream import TextDelta, ToolCallDone
from server.core.types import TokenEvent
from server.gguf_metadata import GGUFFormatError, GGUFSummary, file_sha256, gguf_summary, rfc3339
from server.streaming import ndjson_response

router = APIRouter(tags=["Ollama"])
RequireKey = key_required(Dialect.OLLAMA)
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


@router.post(
    "/api/generate", dependencies=[RequireKey], openapi_extra=json_body(OllamaGenerateRequest)
)
async def generate(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    body = await parse_json_body(request, OllamaGenerateRequest, Dialect.OLLAMA)
    plan = adapter.generate_plan(
        body, model.chat_template, common.new_id("gen-"), settings.defaultgenamt
    )
    job = common.submit(scheduler, model, plan.generation, Dialect.OLLAMA)
    if body.stream:
        return ndjson_response(
            _generate_lines(request, scheduler, job, body.model), drop_when=job.abandoned
        )
    return await common.answer_when_done(
        request,
        scheduler,
        job,
        Dialect.OLLAMA,
        lambda text, outcome: {
            **adapter.generate_chunk(body.model, text),
            **adapter.final_fields(outcome),
        },
    )


async def _generate_lines(
    request: Request, scheduler: Scheduler, job: Job, model: str
) -> AsyncIterator[dict[str, Any]]:
    keepalive = request.app.state.keepalive_seconds
    async for event in scheduler.events(job, idle_timeout=keepalive):
        if event is None:
            yield adapter.generate_chunk(model, "")
        elif isinstance(event, TokenEvent):
            yield adapter.generate_chunk(model, event.text)
        else:
            if common.failed(event):
                # ollama-python raises on the error line; other readers still see the end.
                yield {"error": common.failure_message(event)}
            yield {**adapter.generate_chunk(model, ""), **adapter.final_fields(event)}


@router.post("/api/chat", dependencies=[RequireKey], openapi_extra=json_body(OllamaChatRequest))
async def chat(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    body = await parse_json_body(request, OllamaChatRequest, Dialect.OLLAMA)
    plan = adapter.chat_plan(
        body,
        model.chat_template,
        common.new_id("chat-"),
        settings.defaultgenamt,
        settings.jinja_tools,
    )
    job = common.submit(scheduler, model, plan.generation, Dialect.OLLAMA)
    if body.stream:
        return ndjson_response(
            _chat_lines(request, scheduler, job, plan, body.model), drop_when=job.abandoned
        )
    return await common.chat_answer_when_done(
        request,
        scheduler,
        job,
        plan,
        Dialect.OLLAMA,
        lambda answer: {
            **adapter.chat_chunk(body.model, answer.text, answer.tool_calls),
            **adapter.final_fields(answer.outcome),
        },
    )


async def _chat_lines(
    request: Request, scheduler: Scheduler, job: Job, plan: common.ChatPlan, model: str
) -> AsyncIterator[dict[str, Any]]:
    keepalive = request.app.state.keepalive_seconds
    async for item in common.chat_events(scheduler, job, plan, keepalive):
        if item is None:
            yield adapter.chat_chunk(model, "")  # a harmless keep-alive line
        elif isinstance(item, TextDelta):
            yield adapter.chat_chunk(model, item.text)
        elif isinstance(item, ToolCallDone):
            # Ollama sends each call whole, arguments as an object.
            yield adapter.chat_chunk(model, "", (item.call,))
        elif isinstance(item, common.ChatEnd):
            outcome = item.answer.outcome
            if common.failed(outcome):
                yield {"error": common.failure_message(outcome)}  # then the end, as above
            yield {**adapter.chat_chunk(model, ""), **adapter.final_fields(outcome)}


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


def _details(summary: GGUFSummary | None) -> dict[str, Any]:
    family = summary.architecture if summary else ""
    return {
        "format": "gguf",
        "family": family,
        "families": [family] if family else None,
        "parameter_size": summary.parameter_size if summary else "",
        "quantization_level": summary.quantization if summary else "",
        "parent_model": "",
    }


def _model_entry(
    name: str, context_size: int, file: tuple[GGUFSummary, str] | None
) -> dict[str, Any]:
    summary, digest = file or (None, "")
    return {
        "name": f"{name}:latest",
        "model": f"{name}:latest",
        "modified_at": rfc3339(summary.modified_at) if summary else None,
        "size": summary.file_size if summary else 0,
        "digest": digest,
        "details": _details(summary),
        "context_length": context_size,
    }


def _model_info(summary: GGUFSummary | None) -> dict[str, Any]:
    """Ollama's `model_info`: the GGUF's metadata keys (long arrays such as the vocabulary as
    null, as Ollama sends them unless verbose; the chat template goes in `template`), plus
    `general.parameter_count`."""
    if summary is None:
        return {}
    info: dict[str, Any] = {
        key: value for key, value in summary.metadata.items() if key != "tokenizer.chat_template"
    }
    info["general.parameter_count"] = summary.parameter_count
    return info


@router.get("/api/tags")
async def tags(model: ModelInfoDep) -> dict[str, Any]:
    file = await _model_file(model, with_digest=True)
    return {"models": [_model_entry(model.name, model.context_size, file)]}


@router.get("/api/ps")
async def running_models(model: ModelInfoDep) -> dict[str, Any]:
    file = await _model_file(model, with_digest=True)
    entry = _model_entry(model.name, model.context_size, file)
    expires_at = rfc3339(datetime.now(UTC) + NEVER_UNLOADS)
    # size: the model file (Ollama reports its memory estimate); all of it is in RAM on CPU.
    return {"models": [{**entry, "expires_at": expires_at, "size_vram": 0}]}


@router.post("/api/show", openapi_extra=json_body(OllamaShowRequest, required=False))
async def show(request: Request, model: ModelInfoDep) -> dict[str, Any]:
    await parse_json_body(request, OllamaShowRequest, Dialect.OLLAMA, optional=True)
    file = await _model_file(model, with_digest=False)
    summary = file[0] if file else None
    return {
        "modelfile": f"FROM {model.name}",
        "parameters": f"num_ctx {model.context_size}",
        "template": (summary.chat_template or "") if summary else "",
        "details": _details(summary),
        "model_info": _model_info(summary),
        "capabilities": list(CAPABILITIES),
        "modified_at": rfc3339(summary.modified_at) if summary else None,
    }


@router.get("/api/version")
async def version() -> dict[str, str]:
    return {"version": OLLAMA_COMPAT_VERSION, "hearth": __version__}
