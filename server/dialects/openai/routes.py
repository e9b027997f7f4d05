"""OpenAI endpoints: /v1/completions, /v1/chat/completions, /v1/responses, /v1/models, and
the prompt size of a chat or Responses request (`…/input_tokens`).

Each plans its generation (adapter.py) and names the wire it is answered in (formatter.py);
`respond.generation_route` does the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fastapi import APIRouter, Request

from server.core.engine import Tokenizer
from server.dialects import common
from server.dialects.common import ChatOptions, ChatPlan
from server.dialects.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.errors import Dialect, parse_json_body
from server.dialects.model_files import listed_models, read_model_file
from server.dialects.openai import adapter, formatter
from server.dialects.openai.schemas import (
    ChatCompletion,
    Completion,
    InputTokens,
    ModelEntry,
    ModelList,
    OpenAIChatRequest,
    OpenAICompletionRequest,
    ResponseObject,
    ResponsesRequest,
)
from server.dialects.openapi import json_body
from server.dialects.respond import Generation, Served, generation_route, named_model

router = APIRouter(tags=["OpenAI"])
OPENAI = Dialect.OPENAI


@router.get("/v1/models")
async def list_models(request: Request, model: ModelInfoDep) -> ModelList:
    listed = listed_models(request, model)
    return {"object": "list", "data": [await _model_entry(name, path) for name, path in listed]}


async def _model_entry(name: str, path: Path | None) -> ModelEntry:
    entry: ModelEntry = {"id": name, "object": "model", "created": 0, "owned_by": "hearth"}
    file = await read_model_file(path, with_digest=False)
    if file is not None:
        summary = file[0]
        entry["created"] = summary.mtime_ns // 1_000_000_000
        entry["meta"] = formatter.model_meta(summary)
    return entry


@generation_route(router, "/v1/completions", OpenAICompletionRequest, Completion, OPENAI)
def completions(body: OpenAICompletionRequest, served: Served) -> Generation:
    plan = adapter.completion_plan(body, common.new_id("cmpl-"), served.model.tokenizer)
    wire = formatter.CompletionWire(
        plan.generation.request_id,
        served.model.name,
        body.include_usage,
        logprobs=body.logprobs is not None,
        extras=formatter.LlamaExtras.of(body, plan.generation, served.model.context_size),
    )
    return Generation(plan, wire, body.stream, choices=body.n, resumable=body.resumable)


@generation_route(router, "/v1/chat/completions", OpenAIChatRequest, ChatCompletion, OPENAI)
def chat_completions(body: OpenAIChatRequest, served: Served) -> Generation:
    plan = adapter.chat_plan(body, served.chat_options("chatcmpl-"), served.model.tokenizer)
    wire = formatter.ChatWire(
        plan.generation.request_id,
        served.model.name,
        body.include_usage,
        body.logprobs,
        extras=formatter.LlamaExtras.of(body, plan.generation, served.model.context_size),
    )
    return Generation(plan, wire, body.stream, choices=body.n, resumable=body.resumable)


@generation_route(router, "/v1/responses", ResponsesRequest, ResponseObject, OPENAI)
def responses(body: ResponsesRequest, served: Served) -> Generation:
    plan = adapter.responses_plan(body, served.chat_options("resp_"))
    wire = formatter.ResponsesWire(plan.generation.request_id, served.model.name, body)
    resumable = body.stream_options is not None and body.stream_options.resumable
    return Generation(plan, wire, body.stream, resumable=resumable)


Counted = TypeVar("Counted", OpenAIChatRequest, ResponsesRequest)


async def _prompt_size(
    request: Request,
    scheduler: SchedulerDep,
    settings: SettingsDep,
    model: ModelInfoDep,
    body_model: type[Counted],
    plan: Callable[[Counted, ChatOptions, Tokenizer], ChatPlan],
) -> InputTokens:
    """The prompt tokens the body's generation would send: planned as that route plans it."""
    body = await parse_json_body(request, body_model, OPENAI)
    model = await named_model(request, scheduler, model, body.model, OPENAI)
    options = Served(request, settings, model).chat_options("tok-")
    prompt = plan(body, options, model.tokenizer).generation.prompt
    return {
        "object": "response.input_tokens",
        "input_tokens": len(model.tokenizer.tokenize(prompt)),
    }


@router.post(
    "/v1/chat/completions/input_tokens",
    dependencies=[key_required(OPENAI)],
    openapi_extra=json_body(OpenAIChatRequest),
)
async def chat_input_tokens(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> InputTokens:
    """The prompt tokens /v1/chat/completions would send for the same body (llama-server's
    route; its `usage.prompt_tokens` when nothing has to be cut to fit)."""
    return await _prompt_size(
        request, scheduler, settings, model, OpenAIChatRequest, adapter.chat_plan
    )


@router.post(
    "/v1/responses/input_tokens",
    dependencies=[key_required(OPENAI)],
    openapi_extra=json_body(ResponsesRequest),
)
async def responses_input_tokens(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> InputTokens:
    """The prompt tokens /v1/responses would send for the same body (OpenAI's route)."""
    return await _prompt_size(
        request,
        scheduler,
        settings,
        model,
        ResponsesRequest,
        lambda body, options, _tokenizer: adapter.responses_plan(body, options),
    )
