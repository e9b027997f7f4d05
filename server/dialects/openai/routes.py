"""OpenAI endpoints: /v1/completions, /v1/chat/completions, /v1/responses, /v1/models, and
the prompt size of a chat or Responses request (`…/input_tokens`).

Each plans its generation (adapter.py) and names the wire it is answered in (formatter.py,
responses.py); `routing.generation_route` does the rest. llama-server serves the same routes
without `/v1`, and renders a chat body's prompt at `/apply-template`: those are registered
here too, on `llama_server_router` (tagged as llama-server's).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request

from server.dialects.chat import request_fields
from server.dialects.chat.plans import ChatPlan
from server.dialects.edge.deps import ModelInfoDep
from server.dialects.edge.errors import Dialect
from server.dialects.openai import adapter, answer_fields, formatter
from server.dialects.openai.requests import (
    OpenAIChatRequest,
    OpenAICompletionRequest,
    OpenAISamplingFields,
    ResponsesRequest,
)
from server.dialects.openai.responses import ResponsesWire
from server.dialects.openai.schemas import (
    AppliedTemplate,
    ChatCompletion,
    Completion,
    InputTokens,
    ModelEntry,
    ModelList,
    ResponseObject,
)
from server.dialects.pipeline.model_files import public_models, read_model_file
from server.dialects.pipeline.routing import Generation, Served, generation_route, json_route
from server.dialects.routes.llama_extensions import LlamaExtras
from server.dialects.routes.lora import with_lora
from server.dialects.routes.router_models import ListedModel, listed_model

router = APIRouter(tags=["OpenAI"])
llama_server_router = APIRouter(tags=["llama-server"])
OPENAI = Dialect.OPENAI


class ModelListing(ModelList):
    """/v1/models: OpenAI's list, with llama-server's Ollama-like `models` beside it."""

    models: list[ListedModel]


@router.get("/v1/models")
async def list_models(request: Request, model: ModelInfoDep) -> ModelListing:
    listed = public_models(request)  # the served model under its --alias
    choice = request.app.state.model_choice
    return {
        "object": "list",
        "data": [await _model_entry(name, path) for name, path in listed],
        "models": [listed_model(name, path, choice) for name, path in listed],
    }


async def _model_entry(name: str, path: Path | None) -> ModelEntry:
    entry: ModelEntry = {"id": name, "object": "model", "created": 0, "owned_by": "hearth"}
    file = await read_model_file(path, with_digest=False)
    if file is not None:
        summary = file[0]
        entry["created"] = summary.mtime_ns // 1_000_000_000
        entry["meta"] = answer_fields.model_meta(summary)
    return entry


def _extras(body: OpenAISamplingFields, plan: ChatPlan, served: Served) -> LlamaExtras:
    verbose = body.verbose or served.settings.verbose  # llama-server's --verbose: every answer
    return LlamaExtras(plan.generation, served.model.context_size, verbose, body.timings_per_token)


@generation_route(router, "/v1/completions", OpenAICompletionRequest, Completion, OPENAI)
def completions(body: OpenAICompletionRequest, served: Served) -> Generation:
    plan = adapter.completion_plan(body, request_fields.new_id("cmpl-"), served.model.tokenizer)
    plan = with_lora(plan, body.lora, served.settings, OPENAI)
    wire = formatter.CompletionWire(
        plan.generation.request_id,
        served.model.name,
        body.include_usage,
        logprobs=body.logprobs is not None,
        extras=_extras(body, plan, served),
    )
    return Generation(plan, wire, body.stream, choices=body.n, resumable=body.resumable)


@generation_route(router, "/v1/chat/completions", OpenAIChatRequest, ChatCompletion, OPENAI)
def chat_completions(body: OpenAIChatRequest, served: Served) -> Generation:
    plan = adapter.chat_plan(body, served.chat_options("chatcmpl-"), served.model.tokenizer)
    plan = with_lora(plan, body.lora, served.settings, OPENAI)
    wire = formatter.ChatWire(
        plan.generation.request_id,
        served.model.name,
        body.include_usage,
        body.logprobs,
        extras=_extras(body, plan, served),
    )
    return Generation(plan, wire, body.stream, choices=body.n, resumable=body.resumable)


@generation_route(router, "/v1/responses", ResponsesRequest, ResponseObject, OPENAI)
def responses(body: ResponsesRequest, served: Served) -> Generation:
    plan = adapter.responses_plan(body, served.chat_options("resp_"))
    wire = ResponsesWire(
        plan.generation.request_id, served.model.name, body, body.timings_per_token
    )
    resumable = body.stream_options is not None and body.stream_options.resumable
    return Generation(plan, wire, body.stream, resumable=resumable)


def _input_tokens(count: int) -> InputTokens:
    return {"object": "response.input_tokens", "input_tokens": count}


@json_route(
    router, "/v1/chat/completions/input_tokens", OpenAIChatRequest, OPENAI, names_model=True
)
async def chat_input_tokens(body: OpenAIChatRequest, served: Served) -> InputTokens:
    """The prompt tokens /v1/chat/completions would send for the same body (llama-server's
    route; its `usage.prompt_tokens` when nothing has to be cut to fit)."""
    plan = adapter.chat_plan(body, served.chat_options("tok-"), served.model.tokenizer)
    return _input_tokens(served.prompt_size(plan))


@json_route(router, "/v1/responses/input_tokens", ResponsesRequest, OPENAI, names_model=True)
async def responses_input_tokens(body: ResponsesRequest, served: Served) -> InputTokens:
    """The prompt tokens /v1/responses would send for the same body (OpenAI's route)."""
    plan = adapter.responses_plan(body, served.chat_options("tok-"))
    return _input_tokens(served.prompt_size(plan))


# -- llama-server's spellings -----------------------------------------------------------------

generation_route(
    llama_server_router, "/chat/completions", OpenAIChatRequest, ChatCompletion, OPENAI
)(chat_completions)
generation_route(llama_server_router, "/responses", ResponsesRequest, ResponseObject, OPENAI)(
    responses
)
json_route(
    llama_server_router,
    "/chat/completions/input_tokens",
    OpenAIChatRequest,
    OPENAI,
    names_model=True,
)(chat_input_tokens)
json_route(
    llama_server_router, "/responses/input_tokens", ResponsesRequest, OPENAI, names_model=True
)(responses_input_tokens)


@json_route(llama_server_router, "/apply-template", OpenAIChatRequest, OPENAI, names_model=True)
async def apply_template(body: OpenAIChatRequest, served: Served) -> AppliedTemplate:
    """The prompt a chat request would send to the model, rendered by its template."""
    plan = adapter.chat_plan(body, served.chat_options("tmpl-"), served.model.tokenizer)
    return {"prompt": plan.generation.prompt}
