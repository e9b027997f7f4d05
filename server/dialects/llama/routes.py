"""llama-server's native routes, beside the dialects that borrow them.

`/completions` and `/chat/completions` (without `/v1`, as llama-server also serves them) are
the OpenAI routes; `/completion`, `/health`, `/props`, `/slots`, `/tokenize`, `/detokenize`
and `/apply-template` are llama-server's own, with its field names. Errors use the OpenAI
shape, as llama-server does. (`/metrics` is server/dialects/metrics.py.)
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from server import __version__
from server.dialects.common import new_id, tokens_without_bos
from server.dialects.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.errors import APIError, Dialect, parse_json_body
from server.dialects.llama import adapter as llama_adapter
from server.dialects.llama.formatter import NativeCompletionWire
from server.dialects.llama.schemas import (
    AppliedTemplate,
    CompletionRequest,
    Detokenized,
    DetokenizeRequest,
    Health,
    Props,
    Slot,
    Tokenized,
    TokenizeRequest,
    TokenPiece,
)
from server.dialects.model_files import read_model_file
from server.dialects.openai import adapter
from server.dialects.openai.routes import (
    chat_completions,
    chat_input_tokens,
    completions,
    responses_input_tokens,
)
from server.dialects.openai.schemas import (
    ChatCompletion,
    Completion,
    OpenAIChatRequest,
    OpenAICompletionRequest,
    ResponsesRequest,
)
from server.dialects.openapi import json_body
from server.dialects.respond import (
    CLIENT_GONE_STATUS,
    Served,
    generation_route,
    named_model,
    serve,
    whole_answers,
)
from server.dialects.resumable import wants_resumable

router = APIRouter(tags=["llama-server"])
OPENAI = Dialect.OPENAI
RequireKey = key_required(OPENAI)

# The OpenAI routes under llama-server's unprefixed paths.
generation_route(router, "/completions", OpenAICompletionRequest, Completion, OPENAI)(completions)
generation_route(router, "/chat/completions", OpenAIChatRequest, ChatCompletion, OPENAI)(
    chat_completions
)
for path, counter, counted in (
    ("/chat/completions/input_tokens", chat_input_tokens, OpenAIChatRequest),
    ("/responses/input_tokens", responses_input_tokens, ResponsesRequest),
):
    router.add_api_route(
        path,
        counter,
        methods=["POST"],
        dependencies=[RequireKey],
        openapi_extra=json_body(counted),
    )


@router.get("/health")
async def health() -> Health:
    """Always open (llama-server's rule): the server answers once its model is loaded."""
    return {"status": "ok"}


@router.get("/props")
async def props(scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep) -> Props:
    snapshot = scheduler.snapshot()
    placement = model.placement
    file = await read_model_file(model.path, with_digest=False)
    template = (file[0].chat_template or "") if file else ""
    return {
        "default_generation_settings": {
            "n_ctx": model.context_size,
            "params": {"n_predict": settings.defaultgenamt},
        },
        "total_slots": scheduler.parallel_slots,
        "model_path": str(model.path or ""),
        "model_alias": snapshot.model or model.name,
        "chat_template": template,  # the GGUF's own; "" when Hearth uses its built-in format
        "modalities": {"vision": False, "audio": False},
        "build_info": f"Hearth {__version__}",
        "backend": placement.backend if placement.gpu_layers else "CPU",
        "device": placement.device,
    }


@router.post("/tokenize", dependencies=[RequireKey], openapi_extra=json_body(TokenizeRequest))
async def tokenize(request: Request, model: ModelInfoDep) -> Tokenized:
    body = await parse_json_body(request, TokenizeRequest, OPENAI)
    tokenizer = model.tokenizer
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


@router.post("/detokenize", dependencies=[RequireKey], openapi_extra=json_body(DetokenizeRequest))
async def detokenize(request: Request, model: ModelInfoDep) -> Detokenized:
    body = await parse_json_body(request, DetokenizeRequest, OPENAI)
    try:
        return {"content": model.tokenizer.detokenize(body.tokens, special=True)}
    except ValueError as exc:
        raise APIError(400, str(exc), dialect=OPENAI) from None


@router.post(
    "/apply-template", dependencies=[RequireKey], openapi_extra=json_body(OpenAIChatRequest)
)
async def apply_template(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> AppliedTemplate:
    """The prompt a chat request would send to the model, rendered by its template."""
    body = await parse_json_body(request, OpenAIChatRequest, OPENAI)
    model = await named_model(request, scheduler, model, body.model, OPENAI)
    options = Served(request, settings, model).chat_options("tmpl-")
    plan = adapter.chat_plan(body, options, model.tokenizer)
    return {"prompt": plan.generation.prompt}


@router.post("/completion", dependencies=[RequireKey], openapi_extra=json_body(CompletionRequest))
async def completion(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> Response:
    """llama-server's native completion: one prompt (streamed or whole) or several (whole,
    answered as a list)."""
    body = await parse_json_body(request, CompletionRequest, OPENAI)
    model = await named_model(request, scheduler, model, body.model, OPENAI)
    prompts = llama_adapter.prompt_list(body.prompt)
    tokenizer = model.tokenizer
    if prompts is None:
        plan = llama_adapter.completion_plan(
            body, body.prompt, new_id("cmpl-"), tokenizer, settings.defaultgenamt
        )
        wire = NativeCompletionWire(body, model.name, plan.generation, model.context_size)
        resumable = body.stream and wants_resumable(request)  # the header: no body field
        return await serve(
            request, scheduler, model, plan, wire, stream=body.stream, resumable=resumable
        )
    if body.stream:
        raise APIError(400, "streaming answers one prompt at a time", dialect=OPENAI)
    plans = [
        llama_adapter.completion_plan(
            body, prompt, new_id("cmpl-"), tokenizer, settings.defaultgenamt
        )
        for prompt in prompts
    ]
    answers = await whole_answers(request, scheduler, model, plans, OPENAI)
    if answers is None:
        return Response(status_code=CLIENT_GONE_STATUS)
    return JSONResponse(
        [
            NativeCompletionWire(
                body, model.name, plan.generation, model.context_size, index
            ).whole(answer)
            for index, (plan, answer) in enumerate(zip(plans, answers, strict=True))
        ]
    )


@router.get("/slots", dependencies=[RequireKey])
async def slots(scheduler: SchedulerDep, model: ModelInfoDep) -> list[Slot]:
    """The parallel slots and which are generating now (read-only: llama-server's save,
    restore and erase actions are not offered)."""
    slot_count = scheduler.parallel_slots
    running = scheduler.snapshot().running
    return [
        {"id": i, "n_ctx": model.context_size // slot_count, "is_processing": i < running}
        for i in range(slot_count)
    ]
