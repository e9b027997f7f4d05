"""What every dialect's adapter shares: planning a chat (with tools) or a plain completion, and
reading engine events back as dialect-neutral chat events and a finished answer.

Each adapter only maps its wire fields onto these calls, so templates, tool calls and stop
strings behave identically whichever API a client speaks; `serving.py` then answers the plan.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from server.core.chat import (
    TOOL_DECISION_QUESTION,
    ChatMessage,
    ChatTemplate,
    ChatTemplateError,
    PromptEnd,
    ToolCall,
    ToolSpec,
    parse_tool_call,
    tool_call_schema,
)
from server.core.engine import Tokenizer
from server.core.tool_stream import (
    ChatStreamEvent,
    TextDelta,
    ToolCallParser,
    new_call_id,
    whole_call_events,
)
from server.core.types import (
    EmbeddingsEvent,
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    Progress,
    SamplingParams,
    SlotActionEvent,
    TokenEvent,
    TokenLogprob,
)
from server.dialects.errors import APIError, Dialect

# KoboldCpp caps tool-call sampling this way: a call must be well formed more than creative.
_TOOL_CALL_MAX_TEMPERATURE = 0.5


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


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
    # The model's own tool-call tags, parsed live (--jinjatools with a recognized template).
    live_tool_tags: tuple[str, str] | None = None


def text_plan(generation: GenerationRequest) -> ChatPlan:
    """A plain-text generation (no chat, no tools) as a plan, answered the same way."""
    return ChatPlan(generation, user_stops=generation.stop)


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """What planning a chat takes from the server rather than the request."""

    template: ChatTemplate
    request_id: str
    default_max_tokens: int
    native_tools: bool = False  # --jinjatools


def text_of(content: str | Sequence[object] | None, kinds: Collection[str] = ("text",)) -> str:
    """A message's text: the string itself, or the joined text of its parts of `kinds` (OpenAI
    content parts, Anthropic blocks; a part without a type counts as text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(
        getattr(part, "text", None) or ""
        for part in content
        if getattr(part, "type", "text") in kinds
    )


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
) -> ChatPlan:
    """Render the conversation and decide how tool calls are produced.

    With `options.native_tools` (--jinjatools) and a template whose tool-call tags Hearth
    knows, the model's own format is used and calls stream live. Otherwise the reply is a
    JSON-schema-bound call; for "auto" the model is first asked, hidden, whether it needs one
    (KoboldCpp's pre-poll). `end` says where the prompt ends: a continued final assistant
    message cannot also offer tools (the reply would be a call glued to its text).
    """
    template = options.template
    offer_tools = bool(tools) and tool_choice.mode is not ToolChoiceMode.NONE
    if offer_tools and end is PromptEnd.CONTINUE:
        raise APIError(
            400,
            "a final assistant message is continued as it stands, so tools cannot be offered "
            "with it (send tool_choice none, or end with a user message)",
            dialect=dialect,
        )
    live_tags = template.tool_call_tags if offer_tools and options.native_tools else None
    schema = response_schema
    decision_prompt = None
    try:
        if live_tags is not None:
            rendered = template.render(messages, tools, native_tools=True)
        else:
            rendered = template.render(messages, tools if offer_tools else (), end=end)
        if offer_tools and live_tags is None:
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
    )
    return ChatPlan(generation, user_stops, offer_tools and live_tags is None, live_tags)


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


@dataclass(frozen=True, slots=True)
class TokenTrace:
    """The generated tokens of a reply, and their log-probabilities when asked."""

    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    """A finished chat reply: its text and the tool calls it made."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    outcome: GenerationOutcome
    tokens: TokenTrace = TokenTrace()


class TokenCollector:
    """Gathers a reply's events: its text, tokens and log-probabilities."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.token_ids: list[int] = []
        self.logprobs: list[TokenLogprob] = []

    def add(self, event: TokenEvent) -> None:
        self.parts.append(event.text)
        self.token_ids += event.token_ids
        self.logprobs += event.logprobs

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def trace(self) -> TokenTrace:
        return TokenTrace(tuple(self.token_ids), tuple(self.logprobs))


def read_answer(
    plan: ChatPlan, text: str, outcome: GenerationOutcome, tokens: TokenTrace = TokenTrace()
) -> ChatAnswer:
    """A whole reply (non-streamed) read back as text and tool calls."""
    if plan.live_tool_tags is not None:
        parser = ToolCallParser(*plan.live_tool_tags)
        parser.feed(text)
        parser.finish()
        return ChatAnswer("".join(parser.text_parts), tuple(parser.calls), outcome, tokens)
    if plan.constrained_tools and outcome.constrained:
        try:
            return ChatAnswer("", (parse_tool_call(text, new_call_id()),), outcome, tokens)
        except ValueError:
            pass  # cut off mid-call (max tokens): hand back what was generated as text
    return ChatAnswer(text, (), outcome, tokens)


def matched_user_stop(plan: ChatPlan, outcome: GenerationOutcome) -> str | None:
    """The user's own stop string that ended generation (not the template's end of turn)."""
    if outcome.stop_sequence is not None and outcome.stop_sequence in plan.user_stops:
        return outcome.stop_sequence
    return None


@dataclass(frozen=True, slots=True)
class ChatEnd:
    """The last item of a chat stream."""

    answer: ChatAnswer


class ChatReader:
    """A chat generation's engine events as dialect-neutral chat events, ending in ChatEnd.

    Plain text passes through token by token; tagged tool calls stream as parsed; a
    grammar-bound call is only known once complete, so it is buffered and then sent whole.
    """

    def __init__(self, plan: ChatPlan) -> None:
        self._plan = plan
        self._parser = ToolCallParser(*plan.live_tool_tags) if plan.live_tool_tags else None
        self._collected = TokenCollector()

    def read(self, event: EngineReport) -> list[ChatStreamEvent | ChatEnd]:
        if isinstance(event, TokenEvent):
            return self._read_text(event)
        if isinstance(event, Progress):
            return []  # the prompt being read: no chat event (the wire's `progress` says it)
        if isinstance(event, EmbeddingsEvent | SlotActionEvent):
            return []  # a chat plan never embeds nor acts on slots
        collected = self._collected
        if failed(event):
            return [ChatEnd(ChatAnswer(collected.text, (), event, collected.trace))]
        if self._parser is not None:
            items: list[ChatStreamEvent | ChatEnd] = list(self._parser.finish())
            answer = ChatAnswer(
                "".join(self._parser.text_parts),
                tuple(self._parser.calls),
                event,
                collected.trace,
            )
            return [*items, ChatEnd(answer)]
        answer = read_answer(self._plan, collected.text, event, collected.trace)
        if not self._plan.constrained_tools:
            return [ChatEnd(answer)]
        items = [TextDelta(answer.text)] if answer.text else []
        for index, call in enumerate(answer.tool_calls):
            items += whole_call_events(index, call)
        return [*items, ChatEnd(answer)]

    def _read_text(self, event: TokenEvent) -> list[ChatStreamEvent | ChatEnd]:
        self._collected.add(event)
        if self._parser is not None:
            return list(self._parser.feed(event.text))
        # An event without text still carries the log-probabilities of tokens that render as
        # nothing (control tokens): sent, so a stream's logprobs match the whole answer's.
        if self._plan.constrained_tools or not (event.text or event.logprobs):
            return []
        return [TextDelta(event.text, event.token_ids, event.logprobs)]


def failed(outcome: GenerationOutcome) -> bool:
    return outcome.finish_reason is FinishReason.ERROR


def failure_message(outcome: GenerationOutcome) -> str:
    return outcome.error or "generation failed"


def tokens_without_bos(tokenizer: Tokenizer, text: str, special: bool = True) -> list[int]:
    """`text`'s tokens without the BOS the tokenizer adds for a model that wants one."""
    ids = tokenizer.tokenize(text, special=special)
    bos = tokenizer.tokenize("", special=special)
    return ids[len(bos) :] if bos and ids[: len(bos)] == bos else ids


def with_penalty_window(sampling: SamplingParams, last_n: int | None) -> SamplingParams:
    """Apply a `repeat_last_n` as Ollama and llama-server mean it: 0 turns the penalties off,
    -1 covers the whole context (Hearth's 0), None keeps the default window."""
    if last_n == 0:
        return replace(sampling, rep_pen=1.0, presence_penalty=0.0, frequency_penalty=0.0)
    if last_n is not None:
        return replace(sampling, rep_pen_range=max(last_n, 0))
    return sampling


def stop_list(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,) if stop else ()
    return tuple(s for s in stop if s)
