"""llama-server's native routes, beside the dialects that borrow them.

`/completions` and `/chat/completions` (without `/v1`, as llama-server also serves them) are
the OpenAI routes; `/health`, `/props`, `/tokenize`, `/detokenize` and `/apply-template` are
llama-server's own, with its field names. Errors use the OpenAI shape, as llama-server does.
Work in progress for issue 13: `/completion` and `/slots` are not served yet (`/metrics` is
server/api/metrics.py).
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from server import __version__
from server.api.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.api.errors import APIError, Dialect, parse_json_body
from server.api.llama.schemas import (
    AppliedTemplate,
    Detokenized,
    DetokenizeRequest,
    Health,
    Props,
    Tokenized,
    TokenizeRequest,
    TokenPiece,
)
from server.api.model_files import read_model_file
from server.api.openai import adapter
from server.api.openai.routes import chat_completions, completions
from server.api.openai.schemas import (
    ChatCompletion,
    Completion,
    OpenAIChatRequest,
    OpenAICompletionRequest,
)
from server.api.openapi import json_body
from server.api.respond import Served, generation_route, named_model

router = APIRouter(tags=["llama-server"])
OPENAI = Dialect.OPENAI
RequireKey = key_required(OPENAI)

# The OpenAI routes under llama-server's unprefixed paths.
generation_route(router, "/completions", OpenAICompletionRequest, Completion, OPENAI)(completions)
generation_route(router, "/chat/completions", OpenAIChatRequest, ChatCompletion, OPENAI)(
    chat_completions
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
    ids = tokenizer.tokenize(body.content, special=body.parse_special)
    if not body.add_special:  # the tokenizer always adds BOS when the model wants one
        bos = tokenizer.tokenize("", special=body.parse_special)
        if bos and ids[: len(bos)] == bos:
            ids = ids[len(bos) :]
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
    plan = adapter.chat_plan(body, Served(request, settings, model).chat_options("tmpl-"))
    return {"prompt": plan.generation.prompt}
