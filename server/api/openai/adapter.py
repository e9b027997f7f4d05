"""OpenAI requests → core requests, and finished or streamed output → OpenAI JSON objects."""

from __future__ import annotations

import json
import time
from typing import Any

from server.api.common import (
    ChatAnswer,
    ChatPlan,
    SamplingFields,
    ToolChoice,
    ToolChoiceMode,
    plan_chat,
    sampling_from,
    stop_list,
)
from server.api.errors import APIError, Dialect
from server.api.openai.schemas import (
    OpenAIChatMessage,
    OpenAIChatRequest,
    OpenAICompletionRequest,
    OpenAISamplingFields,
    ResponsesRequest,
)
from server.core.chat import ChatMessage, ChatTemplate, ToolCall, ToolSpec
from server.core.tool_stream import ToolArgumentsDelta, ToolCallStart
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SamplingParams,
)

# OpenAI's documented default for /v1/completions: a different one surprises clients.
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


SAMPLING_FIELDS: SamplingFields = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "repetition_penalty": "rep_pen",
    "presence_penalty": "presence_penalty",
}


def _sampling(body: OpenAISamplingFields) -> SamplingParams:
    return sampling_from(body, SAMPLING_FIELDS)


# -- completions -----------------------------------------------------------------------------


def completion_generation(body: OpenAICompletionRequest, request_id: str) -> GenerationRequest:
    prompt = body.prompt if isinstance(body.prompt, str) else "".join(body.prompt)
    return GenerationRequest(
        request_id=request_id,
        prompt=prompt,
        max_tokens=body.max_tokens or COMPLETIONS_DEFAULT_MAX_TOKENS,
        sampling=_sampling(body),
        stop=stop_list(body.stop),
        genkey=body.genkey,
    )


def completion_object(
    completion_id: str, model: str, created: int, text: str, finish_reason: str | None
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
    }


def usage(outcome: GenerationOutcome) -> dict[str, Any]:
    return {
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": outcome.reused_prompt_tokens},
    }


def finish_reason(outcome: GenerationOutcome, tool_call: bool = False) -> str:
    if tool_call:
        return "tool_calls"
    # OpenAI clients switch on exactly stop/length/tool_calls; an abort reads as "stop".
    return "length" if outcome.finish_reason is FinishReason.LENGTH else "stop"


# -- chat ------------------------------------------------------------------------------------


def _text_of(content: str | list[Any] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(
        part.text or "" for part in content if part.type in ("text", "input_text", "output_text")
    )


def _arguments(raw: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"value": raw}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def chat_messages(messages: list[OpenAIChatMessage]) -> list[ChatMessage]:
    return [
        ChatMessage(
            role=m.role,
            content=_text_of(m.content),
            tool_calls=tuple(
                ToolCall(c.id, c.function.name, _arguments(c.function.arguments))
                for c in m.tool_calls or ()
            ),
            tool_call_id=m.tool_call_id,
            name=m.name,
        )
        for m in messages
    ]


def tool_choice(raw: str | dict[str, Any] | None, dialect: Dialect) -> ToolChoice:
    """OpenAI's `tool_choice` (chat's nested or Responses' flat named form) as a ToolChoice."""
    if raw is None:
        return ToolChoice()
    if isinstance(raw, str):
        try:
            return ToolChoice(ToolChoiceMode(raw))
        except ValueError:
            raise APIError(400, f"tool_choice: unknown value {raw!r}", dialect=dialect) from None
    name = raw.get("name") or (raw.get("function") or {}).get("name")
    if not isinstance(name, str):
        raise APIError(400, "tool_choice: a named choice needs a function name", dialect=dialect)
    return ToolChoice(ToolChoiceMode.REQUIRED, name)


def response_schema(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """`response_format` / Responses `text.format` → a JSON schema for the whole reply."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema", response_format)
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema if isinstance(schema, dict) else {"type": "object"}
    return None


def chat_plan(
    body: OpenAIChatRequest,
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
        Dialect.OPENAI,
        request_id=request_id,
        messages=chat_messages(body.messages),
        max_tokens=body.max_completion_tokens or body.max_tokens or default_max,
        sampling=_sampling(body),
        stop=stop_list(body.stop),
        tools=tools,
        tool_choice=tool_choice(body.tool_choice, Dialect.OPENAI),
        response_schema=response_schema(body.response_format),
        native_tools=native_tools,
        genkey=body.genkey,
    )


def openai_tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }


def chat_completion(
    completion_id: str, model: str, created: int, answer: ChatAnswer
) -> dict[str, Any]:
    tool_calls = [openai_tool_call(call) for call in answer.tool_calls]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer.text or (None if tool_calls else ""),
        "refusal": None,
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason(answer.outcome, bool(answer.tool_calls)),
            }
        ],
        "usage": usage(answer.outcome),
    }


class ChatChunks:
    """Builds the `chat.completion.chunk` objects of one stream (same id/created/model)."""

    def __init__(self, completion_id: str, model: str) -> None:
        self._base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

    def delta(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **self._base,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def role(self) -> dict[str, Any]:
        # content null, not "": llama.cpp's conformance tests reject an empty content delta.
        return self.delta({"role": "assistant", "content": None})

    def content(self, text: str) -> dict[str, Any]:
        return self.delta({"content": text})

    def tool_call_start(self, start: ToolCallStart) -> dict[str, Any]:
        # id, type and name once per index: the SDK concatenates repeated strings.
        call = {
            "index": start.index,
            "id": start.call_id,
            "type": "function",
            "function": {"name": start.name, "arguments": ""},
        }
        return self.delta({"tool_calls": [call]})

    def tool_call_arguments(self, delta: ToolArgumentsDelta) -> dict[str, Any]:
        fragment = {"index": delta.index, "function": {"arguments": delta.fragment}}
        return self.delta({"tool_calls": [fragment]})

    def finish(self, reason: str) -> dict[str, Any]:
        return self.delta({}, reason)

    def usage(self, outcome: GenerationOutcome) -> dict[str, Any]:
        return {**self._base, "choices": [], "usage": usage(outcome)}


# -- Responses -------------------------------------------------------------------------------


def responses_messages(body: ResponsesRequest) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    if body.instructions:
        messages.append(ChatMessage("system", body.instructions))
    if isinstance(body.input, str):
        messages.append(ChatMessage("user", body.input))
        return messages
    for item in body.input:
        kind = item.type or "message"
        if kind == "message":
            messages.append(ChatMessage(item.role or "user", _text_of(item.content)))
        elif kind == "function_call":
            call = ToolCall(item.call_id or "", item.name or "", _arguments(item.arguments or ""))
            messages.append(ChatMessage("assistant", tool_calls=(call,)))
        elif kind == "function_call_output":
            output = item.output if isinstance(item.output, str) else _text_of(item.output)
            messages.append(ChatMessage("tool", output, tool_call_id=item.call_id))
    return messages


def responses_plan(
    body: ResponsesRequest,
    template: ChatTemplate,
    request_id: str,
    default_max: int,
    native_tools: bool = False,
) -> ChatPlan:
    tools = [
        ToolSpec(t.name, t.description, t.parameters or {})
        for t in body.tools or ()
        if t.type == "function"
    ]
    text_format = (body.text or {}).get("format")
    return plan_chat(
        template,
        Dialect.OPENAI,
        request_id=request_id,
        messages=responses_messages(body),
        max_tokens=body.max_output_tokens or default_max,
        sampling=sampling_from(body, SAMPLING_FIELDS),
        tools=tools,
        tool_choice=tool_choice(body.tool_choice, Dialect.OPENAI),
        response_schema=response_schema(text_format if isinstance(text_format, dict) else None),
        native_tools=native_tools,
        genkey=body.genkey,
    )


class ResponseBuilder:
    """The Response object of one request and its streamed events, numbered in order."""

    def __init__(self, response_id: str, model: str, body: ResponsesRequest) -> None:
        self.response_id = response_id
        self.message_id = "msg_" + response_id.removeprefix("resp_")
        self._model = model
        self._body = body
        self._created = int(time.time())
        self._sequence = 0

    def event(self, kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return kind, payload

    def response(
        self,
        status: str,
        output: list[dict[str, Any]],
        outcome: GenerationOutcome | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        cut_off = outcome is not None and outcome.finish_reason is FinishReason.LENGTH
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self._created,
            "status": "incomplete" if cut_off and status == "completed" else status,
            "model": self._model,
            "output": output,
            "output_text": "".join(
                part["text"]
                for item in output
                if item["type"] == "message"
                for part in item["content"]
            ),
            "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if cut_off else None,
            "instructions": self._body.instructions,
            "max_output_tokens": self._body.max_output_tokens,
            "parallel_tool_calls": False,
            "temperature": self._body.temperature,
            "top_p": self._body.top_p,
            "tool_choice": self._body.tool_choice or "auto",
            "tools": [t.model_dump() for t in self._body.tools or ()],
            "text": self._body.text or {"format": {"type": "text"}},
            "metadata": {},
            "usage": None
            if outcome is None
            else {
                "input_tokens": outcome.prompt_tokens,
                "input_tokens_details": {"cached_tokens": outcome.reused_prompt_tokens},
                "output_tokens": outcome.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
            },
        }

    def message_item(self, text: str, status: str = "completed") -> dict[str, Any]:
        content = (
            []
            if status == "in_progress"
            else [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
        )
        return {
            "type": "message",
            "id": self.message_id,
            "role": "assistant",
            "status": status,
            "content": content,
        }

    def function_call_item(
        self, call_id: str, name: str, arguments: str, status: str = "completed"
    ) -> dict[str, Any]:
        return {
            "type": "function_call",
            "id": "fc_" + call_id.removeprefix("call_"),
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": status,
        }

    def output_for(self, answer: ChatAnswer) -> list[dict[str, Any]]:
        items = [self.message_item(answer.text)] if answer.text or not answer.tool_calls else []
        items += [
            self.function_call_item(c.id, c.name, json.dumps(c.arguments))
            for c in answer.tool_calls
        ]
        return items
