"""OpenAI endpoints: /v1/completions, /v1/chat/completions, /v1/responses, /v1/models, and
the prompt size of a chat or Responses request (`…/input_tokens`).

Each plans its generation (adapter.py) and names the wire it is answered in (formatter.py);
`respond.generation_route` does the rest.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request

from server.api import common
from server.api.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.api.errors import Dialect, parse_json_body
from server.api.model_files import listed_models, read_model_file
from server.api.openai import adapter, formatter
from server.api.openai.schemas import (
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
from server.api.openapi import json_body
from server.api.respond import Generation, Served, generation_route, named_model

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
    return Generation(plan, wire, body.stream, choices=body.n)


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
    return Generation(plan, wire, body.stream, choices=body.n)


@generation_route(router, "/v1/responses", ResponsesRequest, ResponseObject, OPENAI)
def responses(body: ResponsesRequest, served: Served) -> Generation:
    plan = adapter.responses_plan(body, served.chat_options("resp_"))
    wire = formatter.ResponsesWire(plan.generation.request_id, served.model.name, body)
    return Generation(plan, wire, body.stream)


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
    body = await parse_json_body(request, OpenAIChatRequest, OPENAI)
    model = await named_model(request, scheduler, model, body.model, OPENAI)
    plan = adapter.chat_plan(
        body, Served(request, settings, model).chat_options("tok-"), model.tokenizer
    )
    return input_tokens(model.tokenizer.tokenize(plan.generation.prompt))


@router.post(
    "/v1/responses/input_tokens",
    dependencies=[key_required(OPENAI)],
    openapi_extra=json_body(ResponsesRequest),
)
async def responses_input_tokens(
    request: Request, scheduler: SchedulerDep, settings: SettingsDep, model: ModelInfoDep
) -> InputTokens:
    """The prompt tokens /v1/responses would send for the same body (OpenAI's route)."""
    body = await parse_json_body(request, ResponsesRequest, OPENAI)
    model = await named_model(request, scheduler, model, body.model, OPENAI)
    plan = adapter.responses_plan(body, Served(request, settings, model).chat_options("tok-"))
    return input_tokens(model.tokenizer.tokenize(plan.generation.prompt))


def input_tokens(prompt: list[int]) -> InputTokens:
    return {"object": "response.input_tokens", "input_tokens": len(prompt)}
