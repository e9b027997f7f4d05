"""Ollama requests → core requests, and answers → Ollama objects (durations in nanoseconds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from server.api.common import ChatPlan, SamplingFields, plan_chat, sampling_from
from server.api.errors import Dialect
from server.api.ollama.schemas import (
    OllamaChatRequest,
    OllamaGenerateRequest,
    OllamaMessage,
    OllamaOptions,
)
from server.core.chat import ChatMessage, ChatTemplate, ToolCall, ToolSpec
from server.core.types import FinishReason, GenerationOutcome, SamplingParams

_NANOSECONDS = 1_000_000_000


def created_at() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


SAMPLING_FIELDS: SamplingFields = {  # fields of `options`
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "repeat_penalty": "rep_pen",
    "presence_penalty": "presence_penalty",
}


def _sampling(options: OllamaOptions) -> SamplingParams:
    return sampling_from(options, SAMPLING_FIELDS)


def _max_tokens(options: OllamaOptions, default: int) -> int:
    return options.num_predict if options.num_predict and options.num_predict > 0 else default


def format_schema(format_: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if format_ == "json":
        return {"type": "object"}
    return format_ if isinstance(format_, dict) else None


def generate_plan(
    body: OllamaGenerateRequest, template: ChatTemplate, request_id: str, default_max: int
) -> ChatPlan:
    """`/api/generate` applies the model's template to the prompt, unless `raw`."""
    messages = [ChatMessage("system", body.system)] if body.system else []
    messages.append(ChatMessage("user", body.prompt))
    plan = plan_chat(
        template,
        Dialect.OLLAMA,
        request_id=request_id,
        messages=messages,
        max_tokens=_max_tokens(body.options, default_max),
        sampling=_sampling(body.options),
        stop=body.options.stop or (),
        response_schema=format_schema(body.format),
    )
    if not body.raw:
        return plan
    raw_generation = replace(plan.generation, prompt=body.prompt, stop=plan.user_stops)
    return replace(plan, generation=raw_generation)


def chat_messages(messages: list[OllamaMessage]) -> list[ChatMessage]:
    return [
        ChatMessage(
            role=m.role,
            content=m.content,
            tool_calls=tuple(
                ToolCall(f"call_{i}", c.function.name, c.function.arguments)
                for i, c in enumerate(m.tool_calls or ())
            ),
            name=m.tool_name,
        )
        for m in messages
    ]


def chat_plan(
    body: OllamaChatRequest,
    template: ChatTemplate,
    request_id: str,
    default_max: int,
    native_tools: bool = False,
) -> ChatPlan:
    tools = [
        ToolSpec(t.function.name, t.function.description, t.function.parameters or {})
        for t in body.tools or ()
    ]
    return plan_chat(
        template,
        Dialect.OLLAMA,
        request_id=request_id,
        messages=chat_messages(body.messages),
        max_tokens=_max_tokens(body.options, default_max),
        sampling=_sampling(body.options),
        stop=body.options.stop or (),
        tools=tools,
        response_schema=format_schema(body.format),
        native_tools=native_tools,
    )


def done_reason(outcome: GenerationOutcome) -> str:
    if outcome.server_stopping:
        return "unload"  # Ollama's word for a model going away under a request
    if outcome.finish_reason is FinishReason.ERROR:
        return "error"
    return "length" if outcome.finish_reason is FinishReason.LENGTH else "stop"


def final_fields(outcome: GenerationOutcome) -> dict[str, Any]:
    """The counts and real durations (KoboldCpp sends fake ones) of the last object."""
    prompt_ns = int(outcome.prompt_seconds * _NANOSECONDS)
    eval_ns = int(outcome.generation_seconds * _NANOSECONDS)
    return {
        "done": True,
        "done_reason": done_reason(outcome),
        "total_duration": prompt_ns + eval_ns,
        "load_duration": 0,
        "prompt_eval_count": outcome.prompt_tokens,
        "prompt_eval_duration": prompt_ns,
        "eval_count": outcome.completion_tokens,
        "eval_duration": eval_ns,
    }


def generate_chunk(model: str, text: str) -> dict[str, Any]:
    return {"model": model, "created_at": created_at(), "response": text, "done": False}


def chat_chunk(model: str, text: str, tool_calls: Sequence[ToolCall] = ()) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"function": {"index": index, "name": call.name, "arguments": call.arguments}}
            for index, call in enumerate(tool_calls)
        ]
    return {"model": model, "created_at": created_at(), "message": message, "done": False}
