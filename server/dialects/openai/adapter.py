"""OpenAI requests (completions, chat, Responses) → plans for the scheduler."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from server.core.scheduling.engine import Tokenizer
from server.core.templates.chat import ChatMessage, PromptEnd, ToolCall, ToolSpec
from server.core.types import GenerationRequest, MediaInput, SamplingParams
from server.dialects.chat.function_tools import function_tools
from server.dialects.chat.plans import (
    ChatOptions,
    ChatPlan,
    ToolChoice,
    ToolChoiceMode,
    plan_chat,
    text_plan,
)
from server.dialects.chat.request_fields import stop_list, text_of
from server.dialects.chat.thinking import ThinkingAsk
from server.dialects.chat.token_bias import resolve_logit_bias
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.edge.sampling import sampling_from
from server.dialects.media.media import media_from_base64, media_from_url
from server.dialects.media.media_parts import text_and_media
from server.dialects.openai.requests import (
    OpenAIChatMessage,
    OpenAIChatRequest,
    OpenAICompletionRequest,
    OpenAISamplingFields,
    ResponsesRequest,
)

_OPENAI = Dialect.OPENAI

# OpenAI's documented default for /v1/completions: a different one surprises clients.
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


# -- completions -----------------------------------------------------------------------------


def sampling(body: OpenAISamplingFields, tokenizer: Tokenizer) -> SamplingParams:
    """The body's sampler settings, its logit_bias resolved to this model's token ids."""
    bias = resolve_logit_bias(body.logit_bias, tokenizer, Dialect.OPENAI)
    return replace(sampling_from(body), logit_bias=bias)


def completion_plan(
    body: OpenAICompletionRequest, request_id: str, tokenizer: Tokenizer
) -> ChatPlan:
    prompt = body.prompt if isinstance(body.prompt, str) else "".join(body.prompt)
    generation = GenerationRequest(
        request_id=request_id,
        prompt=prompt,
        max_tokens=body.max_tokens or COMPLETIONS_DEFAULT_MAX_TOKENS,
        sampling=sampling(body, tokenizer),
        stop=stop_list(body.stop),
        genkey=body.genkey,
        json_schema=body.json_schema,
        grammar=None if body.json_schema is not None else body.grammar,
        logprobs=body.logprobs,
        report_progress=body.stream and body.return_progress,
    )
    return text_plan(generation)


# -- chat ------------------------------------------------------------------------------------


# The content-part types that carry text, in chat and in Responses input.
_TEXT_PARTS = ("text", "input_text", "output_text")


def _arguments(raw: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"value": raw}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def chat_messages(messages: list[OpenAIChatMessage]) -> list[ChatMessage]:
    turns = []
    for index, m in enumerate(messages):
        text, media = text_and_media(m.content, part_media, f"messages[{index}]", _TEXT_PARTS)
        calls = tuple(
            ToolCall(c.id, c.function.name, _arguments(c.function.arguments))
            for c in m.tool_calls or ()
        )
        reasoning = m.reasoning_content or ""
        turns.append(
            ChatMessage(m.role, text, calls, m.tool_call_id, m.name, reasoning, media=media)
        )
    return turns


def part_media(part: object, where: str) -> MediaInput | None:
    """A chat or Responses content part's image (`image_url`, `input_image`) or sound
    (`input_audio`), checked; None for a text part."""
    kind = getattr(part, "type", "")
    if kind in ("image_url", "input_image"):
        url = getattr(part, "image_url", None)
        if isinstance(url, dict):
            url = url.get("url")
        if not isinstance(url, str) or not url:
            raise APIError(400, f"{where}: an {kind} part needs its image_url", dialect=_OPENAI)
        return media_from_url(url, _OPENAI, where=where)
    if kind == "input_audio":
        audio = getattr(part, "input_audio", None) or {}
        data, declared = audio.get("data"), audio.get("format")
        if not isinstance(data, str) or not data:
            raise APIError(400, f"{where}: input_audio needs its base64 data", dialect=_OPENAI)
        return media_from_base64(
            data, _OPENAI, expect="audio", declared=str(declared or "") or None, where=where
        )
    return None


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


_NO_SCHEMA: dict[str, Any] = {}


def response_schema(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    """`response_format` / Responses `text.format` → a JSON schema for the whole reply.

    Every shape llama-server accepts: `text`, `json_object` (any object, or llama-server's
    `schema` inside it), `json_schema` with OpenAI's nested `json_schema.schema` or a flat
    `schema`. Another type, or a schema that is not an object, is a 400."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema", _NO_SCHEMA)
    elif kind == "json_schema":
        spec = response_format.get("json_schema", response_format)
        schema = spec.get("schema", _NO_SCHEMA) if isinstance(spec, dict) else None
    else:
        raise APIError(
            400,
            f"response_format: unknown type {kind!r} (text, json_object or json_schema)",
            dialect=Dialect.OPENAI,
        )
    if schema is _NO_SCHEMA:
        return {"type": "object"}
    if not isinstance(schema, dict):
        raise APIError(400, "response_format: the schema must be an object", dialect=Dialect.OPENAI)
    return schema


def prompt_end(body: OpenAIChatRequest) -> PromptEnd:
    """Where the prompt ends, by llama-server's rules: a final assistant message is carried
    on (prefill) unless `continue_final_message` is false; `add_generation_prompt: false`
    leaves the last turn closed with no reply turn opened."""
    messages = body.messages
    final = messages[-1]
    continuing = body.continue_final_message
    if continuing and body.add_generation_prompt:
        raise APIError(
            400,
            "Cannot set both add_generation_prompt and continue_final_message to true.",
            dialect=Dialect.OPENAI,
        )
    if continuing is None and final.role == "assistant" and not final.tool_calls:
        if len(messages) >= 2 and messages[-2].role == "assistant":
            # Which of them would be continued? llama-server refuses it the same way.
            raise APIError(
                400,
                "Cannot have 2 or more assistant messages at the end of the list.",
                dialect=Dialect.OPENAI,
            )
        return PromptEnd.CONTINUE
    if continuing:
        if final.role != "assistant":
            raise APIError(
                400,
                "continue_final_message: the last message must be the assistant's",
                dialect=Dialect.OPENAI,
            )
        return PromptEnd.CONTINUE
    return PromptEnd.NONE if body.add_generation_prompt is False else PromptEnd.REPLY


def chat_plan(body: OpenAIChatRequest, options: ChatOptions, tokenizer: Tokenizer) -> ChatPlan:
    schema = body.json_schema or response_schema(body.response_format)
    template = options.template.with_kwargs(body.chat_template_kwargs)  # the request's win
    options = replace(options, template=template)
    plan = plan_chat(
        options,
        Dialect.OPENAI,
        end=prompt_end(body),
        messages=chat_messages(body.messages),
        max_tokens=body.max_completion_tokens or body.max_tokens or options.default_max_tokens,
        sampling=sampling(body, tokenizer),
        stop=stop_list(body.stop),
        tools=function_tools(body.tools),
        tool_choice=tool_choice(body.tool_choice, Dialect.OPENAI),
        response_schema=schema,
        genkey=body.genkey,
        thinking=ThinkingAsk(
            effort=body.reasoning_effort,
            format=body.reasoning_format,
            template_kwargs=body.chat_template_kwargs or {},
        ),
    )
    logprobs = (body.top_logprobs or 0) if body.logprobs else None
    grammar = body.grammar if plan.generation.json_schema is None else None
    generation = replace(
        plan.generation,
        grammar=grammar,
        logprobs=logprobs,
        report_progress=body.stream and body.return_progress,
    )
    return replace(plan, generation=generation)


# -- Responses -------------------------------------------------------------------------------


def responses_messages(body: ResponsesRequest) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    if body.instructions:
        messages.append(ChatMessage("system", body.instructions))
    if isinstance(body.input, str):
        messages.append(ChatMessage("user", body.input))
        return messages
    thought = ""  # a reasoning item's text, for the assistant turn that follows it
    for item in body.input:
        kind = item.type or "message"
        if kind == "reasoning":
            thought += text_of(item.content, ("reasoning_text",)) or text_of(
                item.summary, ("summary_text",)
            )
        elif kind == "message":
            role = item.role or "user"
            reasoning, thought = (thought, "") if role == "assistant" else ("", thought)
            where = f"input[{len(messages)}]"
            content, media = text_and_media(item.content, part_media, where, _TEXT_PARTS)
            messages.append(ChatMessage(role, content, reasoning=reasoning, media=media))
        elif kind == "function_call":
            call = ToolCall(item.call_id or "", item.name or "", _arguments(item.arguments or ""))
            messages.append(ChatMessage("assistant", tool_calls=(call,), reasoning=thought))
            thought = ""
        elif kind == "function_call_output":
            output = (
                item.output if isinstance(item.output, str) else text_of(item.output, _TEXT_PARTS)
            )
            messages.append(ChatMessage("tool", output, tool_call_id=item.call_id))
    return messages


def responses_plan(body: ResponsesRequest, options: ChatOptions) -> ChatPlan:
    tools = [
        ToolSpec(t.name, t.description, t.parameters or {})
        for t in body.tools or ()
        if t.type == "function"
    ]
    text_format = (body.text or {}).get("format")
    options = replace(options, template=options.template.with_kwargs(body.chat_template_kwargs))
    plan = plan_chat(
        options,
        Dialect.OPENAI,
        messages=responses_messages(body),
        max_tokens=body.max_output_tokens or options.default_max_tokens,
        sampling=sampling_from(body),
        tools=tools,
        tool_choice=tool_choice(body.tool_choice, Dialect.OPENAI),
        response_schema=response_schema(text_format if isinstance(text_format, dict) else None),
        genkey=body.genkey,
        thinking=ThinkingAsk(
            effort=body.reasoning.effort if body.reasoning else None,
            template_kwargs=body.chat_template_kwargs or {},
        ),
    )
    progress = body.stream and body.return_progress
    return replace(plan, generation=replace(plan.generation, report_progress=progress))
