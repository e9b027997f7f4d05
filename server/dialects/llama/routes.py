"""llama-server's native routes: `/completion`, `/health`, `/props`, `/tokenize`,
`/detokenize` and `/lora-adapters` (server/dialects/routes/lora.py), with its field names (`/slots`
is server/dialects/llama/slot_routes.py). Errors use the OpenAI shape, as llama-server does.

llama-server also serves the OpenAI routes without `/v1` and `/apply-template` (an OpenAI chat
body's prompt): the OpenAI package registers those (server/dialects/openai/routes.py), and
`/metrics` is server/dialects/routes/metrics.py.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from server import __version__
from server.dialects.chat.plans import ChatPlan
from server.dialects.chat.request_fields import new_id, tokens_without_bos
from server.dialects.chat.thinking import template_thinks
from server.dialects.edge.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.llama import (
    adapter,
    infill,
    proxy_routes,
    rerank,
    router_routes,
    stream_resume,
    tool_routes,
)
from server.dialects.llama.formatter import NativeCompletionWire
from server.dialects.llama.schemas import (
    CompletionRequest,
    Detokenized,
    DetokenizeRequest,
    Health,
    Props,
    SinglePrompt,
    Tokenized,
    TokenizeRequest,
    TokenPiece,
)
from server.dialects.pipeline.model_choice import ModelChoice
from server.dialects.pipeline.preparing import engine_ready
from server.dialects.pipeline.routing import Served, json_route
from server.dialects.pipeline.serving import serve, whole_answers
from server.dialects.routes import lora
from server.dialects.routes.llama_extensions import with_end_token_bias
from server.dialects.streams.resumable import wants_resumable

router = APIRouter(tags=["llama-server"])
router.include_router(stream_resume.router)  # /v1/stream: X-Conversation-Id's resume and Stop
router.include_router(proxy_routes.router)  # /cors-proxy: off, as llama-server without it
router.include_router(infill.router)  # /infill: fill-in-the-middle with the model's FIM tokens
router.include_router(rerank.router)  # /v1/rerank and its spellings, with --rerank
router.include_router(router_routes.router)  # /models, /models/load, /models/unload
router.include_router(tool_routes.router)  # /tools: --tools and MCP servers' tools
OPENAI = Dialect.OPENAI
RequireKey = key_required(OPENAI)


@router.get("/health")
async def health() -> Health:
    """Always open (llama-server's rule): the server answers once its model is loaded."""
    return {"status": "ok"}


@router.get("/props")
async def props(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Props:
    snapshot = scheduler.snapshot()
    choice: ModelChoice = request.app.state.model_choice
    placement = model.placement
    template = model.chat_template
    return {
        "default_generation_settings": {
            # A slot's share of the context, as llama-server's (its `n_ctx` per sequence).
            "n_ctx": model.context_size // max(1, scheduler.parallel_slots),
            "params": {"n_predict": settings.defaultgenamt, "seed": settings.seed},
        },
        "total_slots": scheduler.parallel_slots,
        "model_path": str(model.path or ""),
        "model_alias": choice.public_name(snapshot.model or model.name),  # --alias's first
        "endpoint_slots": not settings.no_slots,
        # The Jinja in use (the user's choice or the GGUF's own; "" for a built-in turn
        # format), and where it came from in words (Hearth's own field).
        "chat_template": template.source or "",
        "chat_template_source": template.origin,
        "thinking": template_thinks(template),  # Hearth's: the chat page's Think toggle
        "modalities": {kind: kind in model.modalities for kind in ("vision", "audio")},
        "build_info": f"Hearth {__version__}",
        "backend": placement.backend if placement.gpu_layers else "CPU",
        "device": placement.device,
        "is_sleeping": scheduler.sleeping,  # --sleep-idle-seconds: reading it never wakes
    }


@json_route(router, "/tokenize", TokenizeRequest, OPENAI)
async def tokenize(body: TokenizeRequest, served: Served) -> Tokenized:
    tokenizer = served.model.tokenizer
    if body.add_special:
        ids = tokenizer.tokenize(body.content, special=body.parse_special)
    else:  # the tokenizer always adds BOS when the model wants one
        ids = tokens_without_bos(tokenizer, body.content, body.parse_special)
    if not body.with_pieces:
        return {"tokens": ids}
    pieces: list[TokenPiece] = [
        {"id": token, "piece": tokenizer.detokenize([token], special=True)} for token in ids
    ]
    return {"tokens": pieces}


@json_route(router, "/detokenize", DetokenizeRequest, OPENAI)
async def detokenize(body: DetokenizeRequest, served: Served) -> Detokenized:
    try:
        return {"content": served.model.tokenizer.detokenize(body.tokens, special=True)}
    except ValueError as exc:
        raise APIError(400, str(exc), dialect=OPENAI) from None


@json_route(router, "/completion", CompletionRequest, OPENAI, names_model=True)
async def completion(body: CompletionRequest, served: Served) -> Response:
    """llama-server's native completion: one prompt (streamed or whole) or several (whole,
    answered as a list)."""
    request, scheduler, model = served.request, served.scheduler, served.model
    prompts = adapter.prompt_list(body.prompt)
    if prompts is None:
        plan = await engine_ready(
            _plan(body, body.prompt, served), model, OPENAI, stream=body.stream
        )
        wire = NativeCompletionWire(body, model.name, plan.generation, model.context_size)
        resumable = body.stream and wants_resumable(request)  # the header: no body field
        return await serve(
            request, scheduler, model, plan, wire, stream=body.stream, resumable=resumable
        )
    if body.stream:
        raise APIError(400, "streaming answers one prompt at a time", dialect=OPENAI)
    plans = [
        await engine_ready(_plan(body, prompt, served), model, OPENAI, stream=False)
        for prompt in prompts
    ]
    answers = await whole_answers(request, scheduler, model, plans, OPENAI)
    return JSONResponse(
        [
            NativeCompletionWire(
                body, model.name, plan.generation, model.context_size, index
            ).whole(answer)
            for index, (plan, answer) in enumerate(zip(plans, answers, strict=True))
        ]
    )


# llama-server serves its native completion at /completions too (only /v1/completions is
# OpenAI's there).
json_route(router, "/completions", CompletionRequest, OPENAI, names_model=True, name="completions")(
    completion
)


def _plan(
    body: CompletionRequest, prompt: SinglePrompt | list[SinglePrompt], served: Served
) -> ChatPlan:
    plan = adapter.completion_plan(
        body, prompt, new_id("cmpl-"), served.model.tokenizer, served.settings.defaultgenamt
    )
    plan = with_end_token_bias(plan, served.model.tokenizer)  # ignore_eos, as reported
    return lora.with_lora(plan, body.lora, served.settings, OPENAI)


@router.get("/lora-adapters", dependencies=[RequireKey])
async def lora_adapters(settings: SettingsDep) -> list[lora.LoraAdapter]:
    """The LoRA adapters (--lora, --lora-scaled) and the scale every request gets now."""
    return lora.adapters(settings)


@router.post("/lora-adapters", dependencies=[RequireKey], openapi_extra=lora.ENTRIES_BODY)
async def set_lora_adapters(request: Request, settings: SettingsDep) -> lora.LoraApplied:
    """Set the scale every request gets (an adapter not named: 0); a request's own `lora`
    still wins for it. The body is a JSON array of {"id", "scale"}."""
    lora.set_scales(settings, await lora.read_entries(request, OPENAI), OPENAI)
    return {"success": True}
