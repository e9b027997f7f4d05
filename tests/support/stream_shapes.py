"""Does each event of a stream have its dialect's typed shape? (for the fuzzer and tests)

The shapes are the formatters' own TypedDicts (server/dialects/*/schemas.py), read strictly: a
missing field, a wrong type or an unexpected field are all problems.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, get_args, get_type_hints

from pydantic import TypeAdapter, ValidationError

from server.dialects.anthropic import schemas as anthropic
from server.dialects.edge import errors
from server.dialects.kobold import schemas as kobold
from server.dialects.ollama import schemas as ollama
from server.dialects.openai import schemas as openai
from server.dialects.routes import llama_extensions as llama

# path → {SSE event name (or "" for unnamed data, "*" for any) → the shape of its data}
_SSE_SHAPES: dict[str, dict[str, Any]] = {
    "/api/extra/generate/stream": {
        "message": kobold.KoboldTokenData,
        "error": kobold.KoboldErrorData,
    },
    "/v1/completions": {"": openai.Completion | errors.OpenAIErrorBody},
    "/completion": {"": llama.NativeChunk | llama.NativeCompletion | errors.OpenAIErrorBody},
    "/completions": {"": llama.NativeChunk | llama.NativeCompletion | errors.OpenAIErrorBody},
    "/v1/chat/completions": {"": openai.ChatCompletionChunk | errors.OpenAIErrorBody},
    "/v1/messages": {
        **{
            kind: shape
            for shape in (
                anthropic.MessageStart,
                anthropic.ContentBlockStart,
                anthropic.ContentBlockDelta,
                anthropic.ContentBlockStop,
                anthropic.MessageDelta,
                anthropic.MessageStop,
            )
            for kind in get_args(get_type_hints(shape)["type"])
        },
        "error": errors.AnthropicErrorBody,
    },
    "/v1/responses": {
        "response.created": openai.ResponseLifecycleEvent,
        "response.in_progress": openai.ResponseLifecycleEvent,
        "response.completed": openai.ResponseLifecycleEvent,
        "response.failed": openai.ResponseLifecycleEvent,
        "response.output_item.added": openai.ItemEvent,
        "response.output_item.done": openai.ItemEvent,
        "response.content_part.added": openai.ContentPartEvent,
        "response.content_part.done": openai.ContentPartEvent,
        "response.output_text.delta": openai.TextDeltaEvent,
        "response.output_text.done": openai.TextDoneEvent,
        "response.function_call_arguments.delta": openai.ArgumentsDeltaEvent,
        "response.function_call_arguments.done": openai.ArgumentsDoneEvent,
        "response.reasoning_text.delta": openai.ReasoningDeltaEvent,
        "response.reasoning_text.done": openai.ReasoningDoneEvent,
        "error": openai.ErrorEvent,
    },
}
_NDJSON_SHAPES: dict[str, Any] = {
    "/api/generate": ollama.GenerateChunk | ollama.StreamError,
    "/api/chat": ollama.ChatChunk | ollama.StreamError,
}


@cache
def _adapter(shape: Any) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


def _problem(shape: Any, data: str) -> str | None:
    try:
        decoded = json.loads(data)
        validated = _adapter(shape).validate_python(decoded)
    except (ValueError, ValidationError) as exc:
        return f"{data[:300]!r}: {exc}"[:1500]
    # Validation drops unknown fields and converts near-misses ("1" for 1): both show here.
    if validated != decoded:
        return f"{data[:300]!r}: fields beyond its shape, or of another type: {validated!r:.300}"
    return None


def stream_problem(path: str, content_type: str, text: str) -> str | None:
    """The first event of a stream that does not have its shape, or None."""
    if content_type.startswith("application/x-ndjson"):
        for line in text.splitlines():
            problem = _problem(_NDJSON_SHAPES[path], line)
            if problem is not None:
                return problem
        return None
    shapes = _SSE_SHAPES[path]
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
        )
        data = fields.get("data")
        if data is None or data == "[DONE]":
            continue
        shape = shapes.get(fields.get("event", ""))
        if shape is None:
            return f"unexpected event {fields.get('event')!r} in {path}"
        problem = _problem(shape, data)
        if problem is not None:
            return problem
    return None


_ANSWER_SHAPES: dict[str, Any] = {
    "/api/v1/generate": kobold.KoboldGenerateResponse,
    "/v1/completions": openai.Completion,
    "/v1/chat/completions": openai.ChatCompletion,
    "/v1/responses": openai.ResponseObject,
    "/v1/messages": anthropic.AnthropicMessageObject,
    "/api/generate": ollama.GenerateChunk,
    "/api/chat": ollama.ChatChunk,
}


# llama-server's unprefixed paths are the OpenAI routes (but /completions: its native one).
for _shapes in (_SSE_SHAPES, _ANSWER_SHAPES):
    _shapes["/chat/completions"] = _shapes["/v1/chat/completions"]
    _shapes["/responses"] = _shapes["/v1/responses"]


def answer_problem(path: str, text: str) -> str | None:
    """What is wrong with a whole (non-streamed) answer's shape, or None."""
    return _problem(_ANSWER_SHAPES[path], text)
