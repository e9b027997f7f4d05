"""Planning a chat (with tools) or a plain completion: what every dialect's adapter turns its
wire fields into, so templates, tool calls, thoughts and stop strings behave alike whichever API
a client speaks; `pipeline/serving.py` then answers the plan.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from server.core.templates.chat import (
    TOOL_DECISION_QUESTION,
    ChatMessage,
    ChatTemplate,
    ChatTemplateError,
    PromptEnd,
    ToolSpec,
)
from server.core.text.reasoning import ThinkingSyntax
from server.core.tool_calls.tool_formats_bound import tool_call_schema
from server.core.tool_calls.tool_formats_live import LiveTools
from server.core.types import (
    GenerationOutcome,
    GenerationRequest,
    SamplingParams,
)
from server.dialects.chat.thinking import (
    ASKS_NOTHING,
    ServerThinking,
    ThinkingAsk,
    plan_thinking,
    with_thought,
)
from server.dialects.edge.errors import APIError, Dialect
from server.dialects.media.media_parts import media_in_turns

# KoboldCpp caps tool-call sampling this way: a call must be well formed more than creative.
_TOOL_CALL_MAX_TEMPERATURE = 0.5


class ToolChoiceMode(enum.Enum):
    NONE = "none"
    AUTO = "auto"  # the model is first asked whether it needs a tool
    REQUIRED = "required"  # a call of one of the tools, or of `name` when set


@dataclass(frozen=True, slots=True)
class ToolChoice:
    mode: ToolChoiceMode = ToolChoiceMode.AUTO
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ChatPlan:
    """A chat request ready for the scheduler, plus what reading its answer needs."""

    generation: GenerationRequest
    user_stops: tuple[str, ...]
    # The reply is a grammar-bound tool call (or plain text, if the model declined one).
    constrained_tools: bool = False
    # The model's own tool-call format, parsed live (jinja_tools, on unless turned off, with a
    # template whose format Hearth knows: server/core/templates/tool_formats.py).
    live_tools: LiveTools | None = None
    # How the reply's thought is told from its answer; None: it is not (the raw text).
    reasoning: ThinkingSyntax | None = None


def text_plan(generation: GenerationRequest) -> ChatPlan:
    """A plain-text generation (no chat, no tools) as a plan, answered the same way."""
    return ChatPlan(generation, user_stops=generation.stop)


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """What planning a chat takes from the server rather than the request."""

    template: ChatTemplate
    request_id: str
    default_max_tokens: int
    native_tools: bool = False  # jinja_tools (--jinjatools / --nojinjatools)
    thinking: ServerThinking = field(default_factory=ServerThinking)  # --reasoning-format, -budget


def plan_chat(
    options: ChatOptions,
    dialect: Dialect,
    *,
    messages: Sequence[ChatMessage],
    max_tokens: int,
    sampling: SamplingParams,
    stop: Sequence[str] = (),
    tools: Sequence[ToolSpec] = (),
    tool_choice: ToolChoice = ToolChoice(),
    response_schema: dict[str, Any] | None = None,
    genkey: str = "",
    end: PromptEnd = PromptEnd.REPLY,
    thinking: ThinkingAsk = ASKS_NOTHING,
) -> ChatPlan:
    """Render the conversation and decide how tool calls and the thought are produced.

    With `options.native_tools` (jinja_tools) and a template whose tool-call format Hearth
    knows, the model's own format is used and calls stream live. Otherwise the reply is a
    JSON-schema-bound call (for "auto" after KoboldCpp's hidden pre-poll). `end` says where
    the prompt ends: a continued final assistant message cannot also offer tools."""
    thought = plan_thinking(options.template, thinking, options.thinking, max_tokens)
    template = thought.template  # told what the request asks of thinking
    offer_tools = bool(tools) and tool_choice.mode is not ToolChoiceMode.NONE
    if offer_tools and end is PromptEnd.CONTINUE:
        raise APIError(
            400,
            "a final assistant message is continued as it stands, so tools cannot be offered "
            "with it (send tool_choice none, or end with a user message)",
            dialect=dialect,
        )
    live_format = template.tool_format if offer_tools and options.native_tools else None
    live = LiveTools(live_format, tuple(tools)) if live_format is not None else None
    schema, decision_prompt = response_schema, None
    try:
        if live is not None:
            rendered = template.render(messages, tools, native_tools=True)
        else:
            rendered = template.render(messages, tools if offer_tools else (), end=end)
        if offer_tools and live is None:
            schema, sampling, decision_prompt = _bound_tool_call(
                template, messages, tools, tool_choice, sampling
            )
    except ChatTemplateError as exc:
        raise APIError(400, str(exc), dialect=dialect) from None
    user_stops = tuple(s for s in stop if s)
    generation = GenerationRequest(
        request_id=options.request_id,
        prompt=rendered.prompt,
        max_tokens=max_tokens,
        sampling=sampling,
        stop=user_stops + rendered.stop,
        genkey=genkey,
        json_schema=schema,
        schema_decision_prompt=decision_prompt,
        cut_loops=offer_tools and live is None,  # a bound call that loops never ends
        media=media_in_turns(messages, rendered.prompt, dialect),
    )
    generation = with_thought(generation, thought, messages, end)
    return ChatPlan(generation, user_stops, offer_tools and live is None, live, thought.syntax)


def _bound_tool_call(
    template: ChatTemplate,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice,
    sampling: SamplingParams,
) -> tuple[dict[str, Any], SamplingParams, str | None]:
    """A reply that is a grammar-bound tool call: the call's JSON schema, the sampling for it,
    and, for "auto", the hidden prompt asking the model whether it needs a tool at all."""
    schema = tool_call_schema(tools, tool_choice.name)
    sampling = replace(sampling, temperature=min(sampling.temperature, _TOOL_CALL_MAX_TEMPERATURE))
    decision_prompt = None
    if tool_choice.mode is ToolChoiceMode.AUTO and tool_choice.name is None:
        extra = TOOL_DECISION_QUESTION
        decision_prompt = template.render(messages, tools, extra_user_turn=extra).prompt
    return schema, sampling, decision_prompt


def matched_user_stop(plan: ChatPlan, outcome: GenerationOutcome) -> str | None:
    """The user's own stop string that ended generation (not the template's end of turn)."""
    if outcome.stop_sequence is not None and outcome.stop_sequence in plan.user_stops:
        return outcome.stop_sequence
    return None
