"""OpenAI endpoints: /v1/completions, /v1/chat/completions, /v1/responses, /v1/models.

Each plans its generation (adapter.py) and names the wire it is answered in (formatter.py);
`respond.generation_route` does the rest.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request

from server.api import common
from server.api.deps import ModelInfoDep
from server.api.errors import Dialect
from server.api.model_files import listed_models, read_model_file
from server.api.openai import adapter, formatter
from server.api.openai.schemas import (
    ChatCompletion,
    Completion,
    ModelEntry,
    ModelList,
    OpenAIChatRequest,
    OpenAICompletionRequest,
    ResponseObject,
    ResponsesRequest,
)
from server.api.respond import Generation, Served, generation_route

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
    )
    return Generation(plan, wire, body.stream)


@generation_route(router, "/v1/chat/completions", OpenAIChatRequest, ChatCompletion, OPENAI)
def chat_completions(body: OpenAIChatRequest, served: Served) -> Generation:
    plan = adapter.chat_plan(body, served.chat_options("chatcmpl-"), served.model.tokenizer)
    wire = formatter.ChatWire(
        plan.generation.request_id, served.model.name, body.include_usage, body.logprobs
    )
    return Generation(plan, wire, body.stream)


@generation_route(router, "/v1/responses", ResponsesRequest, ResponseObject, OPENAI)
def responses(body: ResponsesRequest, served: Served) -> Generation:
    plan = adapter.responses_plan(body, served.chat_options("resp_"))
    wire = formatter.ResponsesWire(plan.generation.request_id, served.model.name, body)
    return Generation(plan, wire, body.stream)
