"""A request's thinking in every dialect: what it asks (on, off, a budget, an effort), what the
plan makes of it, and the reply's thought read apart from its answer.

Each adapter turns its own fields into a `ThinkingAsk` (OpenAI's `reasoning_effort` and
llama-server's `reasoning_format`, Anthropic's `thinking`, Ollama's `think`); `plan_thinking`
decides, with the server's --reasoning-format and --reasoning-budget and what the template shows
of its model, how the reply is split (server/core/text/reasoning.py), what the template is told
(`enable_thinking`, `reasoning_effort`) and the budget the engine holds the thought to.
`ThoughtReader` splits a reply's text events and counts the tokens of its thought.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from server.core.templates.chat import ChatMessage, ChatTemplate, PromptEnd
from server.core.text.reasoning import (
    Piece,
    PieceKind,
    ThinkingSyntax,
    new_splitter,
    prompt_opens_thought,
    thinking_syntax,
)
from server.core.types import GenerationRequest, TokenEvent

ReasoningFormat = Literal["none", "deepseek", "auto"]
REASONING_FORMATS: tuple[ReasoningFormat, ...] = ("none", "deepseek", "auto")

# KoboldCpp's think budget per `reasoning_effort`, as a share of the reply's max tokens
# (koboldcpp-behaviour.md §1c); "high" and above: no limit.
_EFFORT_SHARE = {"none": 0.0, "minimal": 0.10, "low": 0.25, "medium": 0.50}


@dataclass(frozen=True, slots=True)
class ServerThinking:
    """The server's own thinking settings (--reasoning-format, --reasoning-budget)."""

    format: ReasoningFormat = "auto"
    budget: int | None = None  # None: no limit


def server_thinking(reasoning_format: ReasoningFormat, reasoning_budget: int) -> ServerThinking:
    """--reasoning-format and --reasoning-budget (llama-server's -1: no limit)."""
    return ServerThinking(reasoning_format, None if reasoning_budget < 0 else reasoning_budget)


@dataclass(frozen=True, slots=True)
class ThinkingAsk:
    """What a request says about thinking, in any dialect's words (None: it says nothing)."""

    enabled: bool | None = None  # on or off; None: as the template and server have it
    budget: int | None = None  # tokens the thought may take (0: no thinking)
    effort: str | None = None  # a level the template receives as `reasoning_effort`
    format: ReasoningFormat | None = None  # llama-server's per-request reasoning_format
    # Ollama's rule: a reply is split only when the template shows its model thinks (Ollama
    # leaves the text of a model it does not know to think as it is).
    split_only_thinking_templates: bool = False
    # The request's own chat_template_kwargs (llama-server's): its last word to the template.
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)


ASKS_NOTHING = ThinkingAsk()


@dataclass(frozen=True, slots=True)
class ThinkingPlan:
    """What planning made of a request's thinking."""

    syntax: ThinkingSyntax | None  # how the reply is split; None: not at all (the raw text)
    markers: ThinkingSyntax  # the thought's markers (the budget closes a thought with them)
    budget: int | None  # tokens the thought may take; None: no limit
    template: ChatTemplate  # the template, told what the request asks (`template_kwargs`)
    template_kwargs: dict[str, Any] = field(default_factory=dict)


def effort_budget(effort: str | None, max_tokens: int) -> int | None:
    """KoboldCpp's budget for a `reasoning_effort`: none/minimal/low/medium are 0/10/25/50 %
    of the reply's max tokens; anything else (high, xhigh, max, unknown) sets none."""
    share = _EFFORT_SHARE.get(effort or "")
    return None if share is None else int(max_tokens * share)


def template_thinks(template: ChatTemplate) -> bool:
    """Whether the template shows its model thinks (the chat page's Think toggle; Ollama's
    "thinking" capability and its 400 for `think` on a model without it)."""
    return thinking_syntax(template.source) is not None


def plan_thinking(
    template: ChatTemplate, ask: ThinkingAsk, server: ServerThinking, max_tokens: int
) -> ThinkingPlan:
    """The request's thinking against the server's settings and the template: the request's
    budget (or its effort's, else the server's), off when it asks so (or the budget is 0),
    and the split its format asks (llama-server: `auto` and `deepseek` both split)."""
    known = thinking_syntax(template.source)
    markers = known or ThinkingSyntax()
    said = ask.template_kwargs.get("enable_thinking")
    if isinstance(said, bool):  # the request's own switch to the template decides
        ask = replace(ask, enabled=said, effort=None if said else ask.effort)
    effort = ask.effort or _template_effort(template)
    budget = ask.budget if ask.budget is not None else effort_budget(effort, max_tokens)
    if budget is None and not (ask.enabled and server.budget == 0):
        budget = server.budget  # the server's default, unless the request turns thinking on
    if ask.enabled is False:
        budget = 0  # a template that cannot turn thinking off: its thought closes at once
    kwargs: dict[str, Any] = {}
    if ask.enabled is False or budget == 0:
        kwargs["enable_thinking"] = False
    elif ask.enabled:
        kwargs["enable_thinking"] = True
    if ask.effort and ask.effort != "none":
        kwargs["reasoning_effort"] = ask.effort
    split = (ask.format or server.format) != "none"
    if ask.split_only_thinking_templates and known is None:
        split = False
    kwargs.update(ask.template_kwargs)  # the request's own win
    bound = template.with_kwargs(kwargs)
    return ThinkingPlan(markers if split else None, markers, budget, bound, kwargs)


def with_thought(
    generation: GenerationRequest,
    thought: ThinkingPlan,
    messages: Sequence[ChatMessage],
    end: PromptEnd,
) -> GenerationRequest:
    """The generation with its thought's markers, budget, and whether the prompt opened it
    (the template wrote the opening tag, or a continued reply is inside its thought)."""
    prefill = messages[-1].content if end is PromptEnd.CONTINUE and messages else None
    tags = thought.markers.tags
    return replace(
        generation,
        thinking_open=prompt_opens_thought(generation.prompt, tags, prefill),
        thinking_tags=tags,
        reasoning_budget=thought.budget,
        render_special_tokens=thought.syntax is not None and thought.syntax.harmony,
    )


def _template_effort(template: ChatTemplate) -> str | None:
    """The server's default effort (KoboldCpp's Think Effort, --reasoningeffort), which the
    template receives as `reasoning_effort`."""
    effort = template.kwargs.get("reasoning_effort")
    return effort if isinstance(effort, str) else None


class ThoughtReader:
    """A reply's text events split into thought and answer as they come, with the count of the
    thought's tokens: an event's tokens count where its text went (a closing tag, which shows
    in neither, with the thought it closes)."""

    def __init__(self, syntax: ThinkingSyntax, start_inside: bool) -> None:
        self._splitter = new_splitter(syntax, start_inside)
        self.reasoning_parts: list[str] = []
        self.reasoning_tokens = 0
        self._undecided = 0  # tokens of text held back (a tag's beginning?), not yet placed

    def read(self, event: TokenEvent) -> list[Piece]:
        inside = self._splitter.in_thought
        pieces = self._splitter.feed(event.text)
        tokens = len(event.token_ids) + self._undecided
        thought = sum(len(p.text) for p in pieces if p.kind is PieceKind.REASONING)
        answer = sum(len(p.text) for p in pieces if p.kind is not PieceKind.REASONING)
        in_thought = inside or self._splitter.in_thought
        self._undecided = tokens if not (pieces or in_thought) else 0
        if thought > answer or (not answer and in_thought):
            self.reasoning_tokens += tokens
        return self._kept(pieces)

    def finish(self) -> list[Piece]:
        return self._kept(self._splitter.finish())

    def _kept(self, pieces: list[Piece]) -> list[Piece]:
        self.reasoning_parts += (p.text for p in pieces if p.kind is PieceKind.REASONING)
        return pieces

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)
