"""Ollama requests (/api/generate, /api/chat) → plans for the scheduler."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from server.core.templates.chat import ChatMessage, ToolCall
from server.core.types import MEDIA_MARKER, GenerationRequest, MediaInput, SamplingParams
from server.dialects.chat.function_tools import function_tools
from server.dialects.chat.plans import ChatOptions, ChatPlan, plan_chat, text_plan
from server.dialects.chat.request_fields import new_id, with_penalty_window
from server.dialects.chat.thinking import ThinkingAsk, template_thinks
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.edge.sampling import sampling_from
from server.dialects.media.media import media_from_base64
from server.dialects.ollama.schemas import (
    OllamaChatRequest,
    OllamaGenerateRequest,
    OllamaMessage,
    OllamaOptions,
    Think,
)


def keeping_alive(plan: ChatPlan, body: OllamaGenerateRequest | OllamaChatRequest) -> ChatPlan:
    """The plan with the request's keep_alive (how long its model stays loaded after it) and
    its grammar (`options.grammar`, unless a `format` schema binds the reply already)."""
    grammar = body.options.grammar if plan.generation.json_schema is None else None
    generation = replace(plan.generation, keep_alive=body.keep_alive, grammar=grammar)
    return replace(plan, generation=generation)


def load_plan(body: OllamaGenerateRequest | OllamaChatRequest, id_prefix: str) -> ChatPlan:
    """A request with nothing to generate: load the model, or unload it with keep_alive 0."""
    request = GenerationRequest(
        request_id=new_id(id_prefix), prompt="", max_tokens=1, keep_alive=body.keep_alive
    )
    return text_plan(replace(request, model_only=True))


# Ollama's own defaults (its api DefaultOptions): what an Ollama client that sends no options
# expects, Open WebUI's title and follow-up tasks among them. Without its repeat_penalty a
# small model's short task can loop to the whole num_predict.
OLLAMA_SAMPLING = SamplingParams(
    temperature=0.8, top_k=40, top_p=0.9, min_p=0.0, rep_pen=1.1, rep_pen_range=64
)


def sampling(options: OllamaOptions) -> SamplingParams:
    return with_penalty_window(sampling_from(options, OLLAMA_SAMPLING), options.repeat_last_n)


def _max_tokens(options: OllamaOptions, default: int) -> int:
    return options.num_predict if options.num_predict and options.num_predict > 0 else default


def format_schema(format_: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if format_ == "json":
        return {"type": "object"}
    return format_ if isinstance(format_, dict) else None


def thinking_ask(think: Think, model: str, options: ChatOptions) -> ThinkingAsk:
    """Ollama's `think`, by Ollama's rules (server/routes.go): asking a model whose template
    shows no thinking to think is a 400; absent, a thinking model thinks as its template
    does and any other model's text is left as written. A level (low/medium/high) also
    reaches the template as `reasoning_effort` (gpt-oss's)."""
    if think is None:
        return ThinkingAsk(split_only_thinking_templates=True)
    if think is False:
        return ThinkingAsk(enabled=False)
    if not template_thinks(options.template):
        raise APIError(400, f'"{model}" does not support thinking', dialect=Dialect.OLLAMA)
    return ThinkingAsk(enabled=True, effort=None if think is True else think)


def generate_plan(body: OllamaGenerateRequest, options: ChatOptions) -> ChatPlan:
    """`/api/generate` applies the model's template to the prompt, unless `raw` (then the
    text also comes back as written: no template, so no thought to tell apart)."""
    messages = [ChatMessage("system", body.system)] if body.system else []
    media = images_of(body.images, "images")
    messages.append(ChatMessage("user", with_markers(body.prompt, media), media=media))
    plan = plan_chat(
        options,
        Dialect.OLLAMA,
        messages=messages,
        max_tokens=_max_tokens(body.options, options.default_max_tokens),
        sampling=sampling(body.options),
        stop=body.options.stop or (),
        response_schema=format_schema(body.format),
        thinking=thinking_ask(body.think, body.model, options),
    )
    if not body.raw:
        return plan
    raw_generation = replace(
        plan.generation,
        prompt=with_markers(body.prompt, media),
        stop=plan.user_stops,
        thinking_open=False,
    )
    return replace(plan, generation=raw_generation, reasoning=None)


def chat_messages(messages: list[OllamaMessage]) -> list[ChatMessage]:
    turns = []
    for number, m in enumerate(messages):
        media = images_of(m.images, f"messages[{number}].images")
        calls = tuple(
            ToolCall(f"call_{i}", c.function.name, c.function.arguments)
            for i, c in enumerate(m.tool_calls or ())
        )
        content = with_markers(m.content, media)
        reasoning = m.thinking or ""
        turns.append(
            ChatMessage(m.role, content, calls, name=m.tool_name, reasoning=reasoning, media=media)
        )
    return turns


def images_of(images: list[str] | None, where: str) -> tuple[MediaInput, ...]:
    """A message's (or a prompt's) `images`, each checked."""
    return tuple(
        media_from_base64(data, Dialect.OLLAMA, where=f"{where}[{index}]")
        for index, data in enumerate(images or ())
    )


def with_markers(text: str, media: tuple[MediaInput, ...]) -> str:
    """The text with its images' markers before it, as Ollama puts a message's images
    ahead of its words."""
    if not media:
        return text
    return "\n\n".join([*(MEDIA_MARKER for _ in media), *([text] if text else [])])


def chat_plan(body: OllamaChatRequest, options: ChatOptions) -> ChatPlan:
    return plan_chat(
        options,
        Dialect.OLLAMA,
        messages=chat_messages(body.messages),
        max_tokens=_max_tokens(body.options, options.default_max_tokens),
        sampling=sampling(body.options),
        stop=body.options.stop or (),
        tools=function_tools(body.tools),
        response_schema=format_schema(body.format),
        thinking=thinking_ask(body.think, body.model, options),
    )
