"""The KoboldAI API (KoboldCpp's `/api/v1/*` and `/api/extra/*` text endpoints).

Routes stay thin: parse → adapter → scheduler → adapter → response. Every generation goes
through the scheduler's queue, so queue limits, genkeys, abort and disconnects behave the same
for every dialect.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from typing_extensions import TypedDict

from server import __version__
from server.core.caching.prompt_cache import PromptCacheStats
from server.core.scheduling.scheduler import QueueLine
from server.dialects.chat import plans
from server.dialects.edge.deps import (
    ModelInfoDep,
    SchedulerDep,
    SettingsDep,
    has_valid_key,
    key_required,
)
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.kobold import adapter, formatter
from server.dialects.kobold.admin import admin_level
from server.dialects.kobold.lite import LiteFeatures
from server.dialects.kobold.schemas import (
    KoboldAbortResponse,
    KoboldBool,
    KoboldCheckResponse,
    KoboldDetokenized,
    KoboldDetokenizeRequest,
    KoboldGenerateRequest,
    KoboldGenerateResponse,
    KoboldGenkeyRequest,
    KoboldPerf,
    KoboldPromptCache,
    KoboldResultText,
    KoboldTokenCount,
    KoboldTokenCountRequest,
    KoboldValue,
    KoboldVersion,
)
from server.dialects.pipeline.routing import Generation, Served, generation_route, json_route
from server.dialects.streams.resumable import ResumableStreams

KOBOLDAI_API_VERSION = "1.2.5"
KOBOLDCPP_COMPAT_VERSION = "1.116.1"  # the KoboldCpp release whose behaviour Hearth follows

router = APIRouter(tags=["KoboldAI"])
KOBOLD = Dialect.KOBOLD
RequireKey = key_required(KOBOLD)


class KoboldQueueOwner(TypedDict):
    """Hearth: one owner (an API key, else a client address) with requests in flight."""

    owner: str  # a short label for this server's run; never the key or the address
    waiting: int
    running: int


class KoboldPerfWithLine(KoboldPerf):
    """/api/extra/perf with Hearth's fair queue: who waits, by owner label, never by key."""

    queue_owners: list[KoboldQueueOwner]  # in the order of their next turn
    queue_line: list[str]  # each waiting request's owner label, the next one served first


def _generation(body: KoboldGenerateRequest, served: Served, *, stream: bool) -> Generation:
    number: int = next(served.request.app.state.request_numbers)
    default_max = served.settings.defaultgenamt
    generation = adapter.to_generation_request(
        body, f"kai-{number}", default_max, served.model.tokenizer
    )
    return Generation(
        plans.text_plan(generation), formatter.GenerateWire(), stream, resumable=body.resumable
    )


@generation_route(router, "/api/v1/generate", KoboldGenerateRequest, KoboldGenerateResponse, KOBOLD)
def generate(body: KoboldGenerateRequest, served: Served) -> Generation:
    return _generation(body, served, stream=False)


@generation_route(router, "/api/extra/generate/stream", KoboldGenerateRequest, None, KOBOLD)
def generate_stream(body: KoboldGenerateRequest, served: Served) -> Generation:
    return _generation(body, served, stream=True)


@router.get("/api/extra/generate/check", dependencies=[RequireKey])
async def check_get(scheduler: SchedulerDep) -> KoboldCheckResponse:
    return {"results": [{"text": scheduler.text_for("")}]}


@json_route(router, "/api/extra/generate/check", KoboldGenkeyRequest, KOBOLD, optional=True)
async def check_post(body: KoboldGenkeyRequest, served: Served) -> KoboldCheckResponse:
    return {"results": [{"text": served.scheduler.text_for(body.genkey)}]}


@json_route(router, "/api/extra/abort", KoboldGenkeyRequest, KOBOLD, optional=True)
async def abort(body: KoboldGenkeyRequest, served: Served) -> KoboldAbortResponse:
    result = served.scheduler.abort(body.genkey)
    # KoboldCpp sends these as the strings "true"/"false"; clients compare against those.
    return {"success": _kobold_bool(result.success), "done": _kobold_bool(result.done)}


def _kobold_bool(value: bool) -> KoboldBool:
    return "true" if value else "false"


@router.get("/api/extra/perf")
async def perf(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> KoboldPerfWithLine:
    snapshot = scheduler.snapshot()
    line = scheduler.queue_line()
    resumable: ResumableStreams = request.app.state.resumable_streams
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
        "last_draft_success": outcome.draft_accepted if outcome else 0,
        "last_draft_failed": outcome.draft_tokens - outcome.draft_accepted if outcome else 0,
        "total_gens": snapshot.perf.total_gens,
        "total_img_gens": 0,
        "total_tts_gens": 0,
        "total_transcribe_gens": 0,
        "stop_reason": formatter.perf_stop_reason(outcome),
        "queue": snapshot.waiting,
        "running": snapshot.running,  # Hearth: requests generating now (batched ones too)
        "placement": model.placement.describe(),  # Hearth: where the model runs
        "model": snapshot.model,
        "loaded_models": list(snapshot.loaded_models),
        "loading_model": snapshot.loading_model,
        "resumable_streams": resumable.count,
        "resumable_bytes": resumable.retained_bytes,
        "prompt_cache": _prompt_cache(snapshot.prompt_cache),
        "idle": 0 if snapshot.running else 1,
        "hordeexitcounter": -1,
        "uptime": round(now - snapshot.perf.started_at, 3),
        "idletime": round(now - snapshot.perf.last_request_at, 3),
        "quiet": settings.quiet,
        "queue_owners": _queue_owners(line),
        "queue_line": list(line.line),
    }


def _queue_owners(line: QueueLine) -> list[KoboldQueueOwner]:
    return [
        {"owner": share.label, "waiting": share.waiting, "running": share.running}
        for share in line.owners
    ]


def _prompt_cache(stats: PromptCacheStats | None) -> KoboldPromptCache | None:
    if stats is None:
        return None
    answer: KoboldPromptCache = {
        "states": stats.states,
        "bytes": stats.bytes,
        "max_bytes": stats.max_bytes,
        "saved": stats.saved,
        "restored": stats.restored,
        "restored_tokens": stats.restored_tokens,
        "evicted": stats.evicted,
    }
    if stats.disk_max_bytes:
        answer["disk_states"] = stats.disk_states
        answer["disk_bytes"] = stats.disk_bytes
        answer["disk_max_bytes"] = stats.disk_max_bytes
    return answer


def _per_token_ms(seconds: float, tokens: int) -> float:
    return round(seconds * 1000 / tokens, 3) if tokens else 0.0


def _speed(tokens: int, seconds: float) -> float:
    return round(tokens / seconds, 2) if seconds > 0 else 0.0


@router.get("/api/v1/model")
async def model_name(request: Request, scheduler: SchedulerDep) -> KoboldResultText:
    # Clients such as SillyTavern recognise KoboldCpp by this "koboldcpp/" prefix.
    if not has_valid_key(request):
        return {"result": "koboldcpp/protected-model"}
    # The model serving now; KoboldCpp's word for none loaded (after unload_model).
    snapshot = scheduler.snapshot()
    return {"result": f"koboldcpp/{snapshot.model or snapshot.loading_model or 'inactive'}"}


@router.get("/api/v1/info/version")
async def api_version() -> KoboldResultText:
    return {"result": KOBOLDAI_API_VERSION}


@router.get("/api/extra/version")
async def extra_version(
    request: Request, settings: SettingsDep, model: ModelInfoDep
) -> KoboldVersion:
    lite: LiteFeatures = request.app.state.lite  # KoboldAI Lite's features that are on
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
        "multiplayer": lite.shared_story is not None,
        "websearch": lite.web_search is not None,
        "tts": False,
        "embeddings": False,
        "music": False,
        "savedata": lite.save_slots is not None,
        "admin": admin_level(settings),
        "router": False,
        "guidance": False,
        # Hearth renders chats with the model's own template whenever it has one (--jinja is
        # implied), so this says whether the loaded model has one.
        "jinja": model.chat_template.uses_model_template,
        "mcp": False,
        "backend": model.placement.backend if model.placement.gpu_layers else "CPU",
        "device": model.placement.device,
        "gpu_layers": model.placement.gpu_layers,
    }


@router.get("/api/v1/config/max_context_length")
async def max_context_length(model: ModelInfoDep) -> KoboldValue:
    return {"value": model.context_size}


@router.get("/api/extra/true_max_context_length")
async def true_max_context_length(model: ModelInfoDep) -> KoboldValue:
    return {"value": model.context_size}


@router.get("/api/v1/config/max_length")
async def max_length(settings: SettingsDep) -> KoboldValue:
    # KoboldCpp reports --hordegenlen here; the default generation amount is what a client
    # that asks really gets, so Hearth reports that.
    return {"value": settings.defaultgenamt}


@json_route(router, "/api/extra/tokencount", KoboldTokenCountRequest, KOBOLD)
@json_route(router, "/api/extra/tokenize", KoboldTokenCountRequest, KOBOLD)
async def tokencount(body: KoboldTokenCountRequest, served: Served) -> KoboldTokenCount:
    ids = served.model.tokenizer.tokenize(body.prompt, special=body.special)
    return {"value": len(ids), "ids": ids}


@json_route(router, "/api/extra/detokenize", KoboldDetokenizeRequest, KOBOLD)
async def detokenize(body: KoboldDetokenizeRequest, served: Served) -> KoboldDetokenized:
    try:
        text = served.model.tokenizer.detokenize(body.ids, special=body.special)
    except ValueError as exc:
        raise APIError(
            400,
            str(exc),
            body={"result": "", "success": False, "detail": {"msg": str(exc), "type": "bad_input"}},
        ) from None
    return {"result": text, "success": True}
