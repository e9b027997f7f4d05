"""The KoboldAI API (KoboldCpp's `/api/v1/*` and `/api/extra/*` text endpoints).

Routes stay thin: parse → adapter → scheduler → adapter → response. Every generation goes
through the scheduler's queue, so queue limits, genkeys, abort and disconnects behave the same
for every dialect.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sse_starlette import ServerSentEvent

from server import __version__
from server.api import common
from server.api.deps import (
    ModelInfo,
    ModelInfoDep,
    SchedulerDep,
    SettingsDep,
    has_valid_key,
    key_required,
)
from server.api.errors import APIError, Dialect, parse_json_body
from server.api.kobold import adapter
from server.api.kobold.schemas import (
    KoboldDetokenizeRequest,
    KoboldGenerateRequest,
    KoboldGenkeyRequest,
    KoboldTokenCountRequest,
)
from server.api.openapi import json_body
from server.core.scheduler import Job, Scheduler
from server.core.types import FinishReason, TokenEvent
from server.streaming import SSEItem, sse_response

KOBOLDAI_API_VERSION = "1.2.5"
KOBOLDCPP_COMPAT_VERSION = "1.116.1"  # the KoboldCpp release whose behaviour Hearth follows

router = APIRouter(tags=["KoboldAI"])
RequireKey = key_required(Dialect.KOBOLD)


def _new_request_id(request: Request) -> str:
    number: int = next(request.app.state.request_numbers)
    return f"kai-{number}"


async def _admit(
    request: Request, scheduler: Scheduler, model: ModelInfo, settings_default: int
) -> Job:
    """Validate the body and take a queue place, all before the first response byte."""
    body = await parse_json_body(request, KoboldGenerateRequest)
    generation = adapter.to_generation_request(body, _new_request_id(request), settings_default)
    return common.submit(scheduler, model, generation, Dialect.KOBOLD)


@router.post(
    "/api/v1/generate", dependencies=[RequireKey], openapi_extra=json_body(KoboldGenerateRequest)
)
async def generate(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    job = await _admit(request, scheduler, model, settings.defaultgenamt)
    return await common.answer_when_done(
        request, scheduler, job, Dialect.KOBOLD, adapter.generate_response
    )


@router.post(
    "/api/extra/generate/stream",
    dependencies=[RequireKey],
    openapi_extra=json_body(KoboldGenerateRequest),
)
async def generate_stream(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    job = await _admit(request, scheduler, model, settings.defaultgenamt)
    keepalive = request.app.state.keepalive_seconds
    return sse_response(_kobold_events(scheduler, job, keepalive), drop_when=job.abandoned)


async def _kobold_events(
    scheduler: Scheduler, job: Job, keepalive: float
) -> AsyncIterator[SSEItem]:
    async for batch in scheduler.event_batches(job, idle_timeout=keepalive):
        if batch is None:
            yield None
            continue
        events: list[ServerSentEvent] = []
        for event in batch:
            if isinstance(event, TokenEvent):
                if event.text:
                    events.append(
                        ServerSentEvent(adapter.token_event_data(event.text), event="message")
                    )
                continue
            if event.finish_reason is FinishReason.ERROR:
                # Headers are long gone: report the failure in-band, then end as usual.
                message = event.error or "generation failed"
                events.append(ServerSentEvent(adapter.error_event_data(message), event="error"))
            events.append(ServerSentEvent(adapter.final_event_data(event), event="message"))
        if events:
            yield events


@router.get("/api/extra/generate/check", dependencies=[RequireKey])
async def check_get(scheduler: SchedulerDep) -> dict[str, Any]:
    return {"results": [{"text": scheduler.text_for("")}]}


@router.post(
    "/api/extra/generate/check",
    dependencies=[RequireKey],
    openapi_extra=json_body(KoboldGenkeyRequest, required=False),
)
async def check_post(request: Request, scheduler: SchedulerDep) -> dict[str, Any]:
    body = await parse_json_body(request, KoboldGenkeyRequest, optional=True)
    return {"results": [{"text": scheduler.text_for(body.genkey)}]}


@router.post(
    "/api/extra/abort",
    dependencies=[RequireKey],
    openapi_extra=json_body(KoboldGenkeyRequest, required=False),
)
async def abort(request: Request, scheduler: SchedulerDep) -> dict[str, Any]:
    body = await parse_json_body(request, KoboldGenkeyRequest, optional=True)
    result = scheduler.abort(body.genkey)
    # KoboldCpp sends these as the strings "true"/"false"; clients compare against those.
    return {"success": _kobold_bool(result.success), "done": _kobold_bool(result.done)}


def _kobold_bool(value: bool) -> str:
    return "true" if value else "false"


@router.get("/api/extra/perf")
async def perf(scheduler: SchedulerDep, settings: SettingsDep) -> dict[str, Any]:
    snapshot = scheduler.snapshot()
    outcome = snapshot.perf.last_outcome
    prompt_tokens = outcome.prompt_tokens if outcome else 0
    generated = outcome.completion_tokens if outcome else 0
    process_time = outcome.prompt_seconds if outcome else 0.0
    eval_time = outcome.generation_seconds if outcome else 0.0
    now = time.monotonic()
    return {
        # KoboldCpp reports these two as milliseconds per token.
        "last_process": _per_token_ms(process_time, prompt_tokens),
        "last_eval": _per_token_ms(eval_time, generated),
        "last_token_count": generated,
        "last_input_count": prompt_tokens,
        "last_process_time": round(process_time, 4),
        "last_eval_time": round(eval_time, 4),
        "last_process_speed": _speed(prompt_tokens, process_time),
        "last_eval_speed": _speed(generated, eval_time),
        "last_seed": outcome.seed if outcome else -1,
        "last_draft_success": 0,
        "last_draft_failed": 0,
        "total_gens": snapshot.perf.total_gens,
        "total_img_gens": 0,
        "total_tts_gens": 0,
        "total_transcribe_gens": 0,
        "stop_reason": adapter.perf_stop_reason(outcome),
        "queue": snapshot.waiting,
        "running": snapshot.running,  # Hearth: requests generating now (batched ones too)
        "idle": 0 if snapshot.running else 1,
        "hordeexitcounter": -1,
        "uptime": round(now - snapshot.perf.started_at, 3),
        "idletime": round(now - snapshot.perf.last_request_at, 3),
        "quiet": settings.quiet,
    }


def _per_token_ms(seconds: float, tokens: int) -> float:
    return round(seconds * 1000 / tokens, 3) if tokens else 0.0


def _speed(tokens: int, seconds: float) -> float:
    return round(tokens / seconds, 2) if seconds > 0 else 0.0


@router.get("/api/v1/model")
async def model_name(request: Request, model: ModelInfoDep) -> dict[str, str]:
    # Clients such as SillyTavern recognise KoboldCpp by this "koboldcpp/" prefix.
    if not has_valid_key(request):
        return {"result": "koboldcpp/protected-model"}
    return {"result": f"koboldcpp/{model.name}"}


@router.get("/api/v1/info/version")
async def api_version() -> dict[str, str]:
    return {"result": KOBOLDAI_API_VERSION}


@router.get("/api/extra/version")
async def extra_version(settings: SettingsDep, model: ModelInfoDep) -> dict[str, Any]:
    return {
        "result": "KoboldCpp",
        "version": KOBOLDCPP_COMPAT_VERSION,
        "server": "Hearth",
        "hearth_version": __version__,
        "protected": settings.password is not None,
        "llm": True,
        "txt2img": False,
        "vision": False,
        "audio": False,
        "transcribe": False,
        "multiplayer": False,
        "websearch": False,
        "tts": False,
        "embeddings": False,
        "music": False,
        "savedata": False,
        "admin": 0,
        "router": False,
        "guidance": False,
        # Hearth renders chats with the model's own template whenever it has one (--jinja is
        # implied), so this says whether the loaded model has one.
        "jinja": model.chat_template.uses_model_template,
        "mcp": False,
    }


@router.get("/api/v1/config/max_context_length")
async def max_context_length(model: ModelInfoDep) -> dict[str, int]:
    return {"value": model.context_size}


@router.get("/api/extra/true_max_context_length")
async def true_max_context_length(model: ModelInfoDep) -> dict[str, int]:
    return {"value": model.context_size}


@router.get("/api/v1/config/max_length")
async def max_length(settings: SettingsDep) -> dict[str, int]:
    # KoboldCpp reports --hordegenlen here; the default generation amount is what a client
    # that asks really gets, so Hearth reports that.
    return {"value": settings.defaultgenamt}


@router.post(
    "/api/extra/tokencount",
    dependencies=[RequireKey],
    openapi_extra=json_body(KoboldTokenCountRequest),
)
@router.post(
    "/api/extra/tokenize",
    dependencies=[RequireKey],
    openapi_extra=json_body(KoboldTokenCountRequest),
)
async def tokencount(request: Request, model: ModelInfoDep) -> dict[str, Any]:
    body = await parse_json_body(request, KoboldTokenCountRequest)
    ids = model.tokenizer.tokenize(body.prompt, special=body.special)
    return {"value": len(ids), "ids": ids}


@router.post(
    "/api/extra/detokenize",
    dependencies=[RequireKey],
    openapi_extra=json_body(KoboldDetokenizeRequest),
)
async def detokenize(request: Request, model: ModelInfoDep) -> dict[str, Any]:
    body = await parse_json_body(request, KoboldDetokenizeRequest)
    try:
        text = model.tokenizer.detokenize(body.ids, special=body.special)
    except ValueError as exc:
        raise APIError(
            400,
            str(exc),
            body={"result": "", "success": False, "detail": {"msg": str(exc), "type": "bad_input"}},
        ) from None
    return {"result": text, "success": True}
