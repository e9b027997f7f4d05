"""Ollama endpoints: /api/generate and /api/chat (NDJSON streams by default), /api/tags,
/api/show, /api/version, /api/ps.

NDJSON has no comment lines: ollama-python parses every line, so keep-alives during a buffered
tool call are ordinary empty-content chunks, and a failure mid-stream is an `{"error": ...}`
line (which the client raises as ResponseError).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from server import __version__
from server.api import common
from server.api.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.api.errors import Dialect, parse_json_body
from server.api.ollama import adapter
from server.api.ollama.schemas import OllamaChatRequest, OllamaGenerateRequest, OllamaShowRequest
from server.core.scheduler import Job, Scheduler
from server.core.tool_stream import TextDelta, ToolCallDone
from server.core.types import TokenEvent
from server.streaming import ndjson_response

router = APIRouter(tags=["Ollama"])
RequireKey = key_required(Dialect.OLLAMA)
OLLAMA_COMPAT_VERSION = "0.7.0"  # what KoboldCpp reports; clients only display it


@router.post("/api/generate", dependencies=[RequireKey])
async def generate(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    body = await parse_json_body(request, OllamaGenerateRequest, Dialect.OLLAMA)
    plan = adapter.generate_plan(
        body, model.chat_template, common.new_id("gen-"), settings.defaultgenamt
    )
    job = common.submit(scheduler, plan.generation)
    if body.stream:
        return ndjson_response(_generate_lines(request, scheduler, job, body.model))
    finished = await common.finished_text(request, scheduler, job, Dialect.OLLAMA)
    if finished is None:
        return Response(status_code=common.CLIENT_GONE_STATUS)
    text, outcome = finished
    return JSONResponse(
        {**adapter.generate_chunk(body.model, text), **adapter.final_fields(outcome)}
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
        elif common.failed(event):
            yield {"error": common.failure_message(event)}
        else:
            yield {**adapter.generate_chunk(model, ""), **adapter.final_fields(event)}


@router.post("/api/chat", dependencies=[RequireKey])
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
    job = common.submit(scheduler, plan.generation)
    if body.stream:
        return ndjson_response(_chat_lines(request, scheduler, job, plan, body.model))
    finished = await common.finished_text(request, scheduler, job, Dialect.OLLAMA)
    if finished is None:
        return Response(status_code=common.CLIENT_GONE_STATUS)
    text, outcome = finished
    answer = common.read_answer(plan, text, outcome)
    return JSONResponse(
        {
            **adapter.chat_chunk(body.model, answer.text, answer.tool_calls),
            **adapter.final_fields(outcome),
        }
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
                yield {"error": common.failure_message(outcome)}
            else:
                yield {**adapter.chat_chunk(model, ""), **adapter.final_fields(outcome)}


def _model_entry(name: str, context_size: int) -> dict[str, Any]:
    return {
        "name": f"{name}:latest",
        "model": f"{name}:latest",
        "modified_at": "2025-01-01T00:00:00Z",
        "size": 0,
        "digest": "",
        "details": {
            "format": "gguf",
            "family": "",
            "families": None,
            "parameter_size": "",
            "quantization_level": "",
            "parent_model": "",
        },
        "context_length": context_size,
    }


@router.get("/api/tags")
async def tags(model: ModelInfoDep) -> dict[str, Any]:
    return {"models": [_model_entry(model.name, model.context_size)]}


@router.get("/api/ps")
async def running_models(model: ModelInfoDep) -> dict[str, Any]:
    entry = _model_entry(model.name, model.context_size)
    return {"models": [{**entry, "expires_at": "2099-01-01T00:00:00Z", "size_vram": 0}]}


@router.post("/api/show")
async def show(request: Request, model: ModelInfoDep) -> dict[str, Any]:
    await parse_json_body(request, OllamaShowRequest, Dialect.OLLAMA, optional=True)
    entry = _model_entry(model.name, model.context_size)
    return {
        "modelfile": f"FROM {model.name}",
        "parameters": f"num_ctx {model.context_size}",
        "template": "",
        "details": entry["details"],
        "model_info": {"general.architecture": "", "llama.context_length": model.context_size},
        "capabilities": ["completion", "tools"],
    }


@router.get("/api/version")
async def version() -> dict[str, str]:
    return {"version": OLLAMA_COMPAT_VERSION, "hearth": __version__}
