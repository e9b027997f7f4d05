"""Reading a chat generation's engine events back as dialect-neutral chat events.

`ChatReader` is the one reader every chat dialect's stream and whole answer go through, so
both give the same answer: the thought split from the answer, plain text passed on token by
token, tool calls parsed while they are written, in the model's own format (a live parser) or
as a grammar-bound JSON call (server/core/tool_calls/tool_formats_bound.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from server.core.text.reasoning import Piece, PieceKind
from server.core.tool_calls.tool_formats_bound import BoundCallParser
from server.core.tool_calls.tool_stream import (
    ChatStreamEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallStream,
)
from server.core.types import (
    EmbeddingsEvent,
    EngineReport,
    GenerationOutcome,
    Progress,
    SlotActionEvent,
    TokenEvent,
    ToolDecision,
)
from server.dialects.chat.answers import ChatAnswer, TokenCollector, failed
from server.dialects.chat.plans import ChatPlan
from server.dialects.chat.thinking import ThoughtReader


def read_answer(
    plan: ChatPlan, collected: TokenCollector, outcome: GenerationOutcome
) -> ChatAnswer:
    """A whole reply (non-streamed) read back as text, tool calls and thought: its events read
    as a stream reads them, so that both give the same answer."""
    reader = ChatReader(plan)
    for event in collected.events:
        reader.read(event)
    end = reader.read(outcome)[-1]
    assert isinstance(end, ChatEnd)
    return end.answer


@dataclass(frozen=True, slots=True)
class ChatEnd:
    """The last item of a chat stream."""

    answer: ChatAnswer


class ChatReader:
    """A chat generation's engine events as dialect-neutral chat events, ending in ChatEnd.

    The thought, when the plan splits one off, streams as ReasoningDelta; the answer's plain
    text passes through token by token; tool calls stream as parsed, in the model's own format
    or as a grammar-bound call. Only while the hidden tool decision is pending (tool_choice
    "auto" without a format of the model's own) is the answer held back: it is either a call or
    text, and the engine's ToolDecision says which before the first token.
    """

    def __init__(self, plan: ChatPlan) -> None:
        self._plan = plan
        self._parser: ToolCallStream | None = plan.live_tools.parser() if plan.live_tools else None
        syntax, opened = plan.reasoning, plan.generation.thinking_open
        self._thought = ThoughtReader(syntax, opened) if syntax is not None else None
        self._collected = TokenCollector()
        self._answer_parts: list[str] = []  # the answer's text, without a parser
        bound = plan.constrained_tools
        self._deciding = bound and plan.generation.schema_decision_prompt is not None
        if bound and not self._deciding:
            self._parser = BoundCallParser()  # tool_choice "required" or a named tool
        self._held: list[str] = []  # the answer while the tool decision is pending

    def read(self, event: EngineReport) -> list[ChatStreamEvent | ChatEnd]:
        if isinstance(event, TokenEvent):
            self._collected.add(event)
            if self._thought is None:
                return list(self._answer(event.text, event))
            return list(self._route(self._thought.read(event), event))
        if isinstance(event, ToolDecision):
            return self._decided(event.call)
        if isinstance(event, Progress):
            return []  # the prompt being read: no chat event (the wire's `progress` says it)
        if isinstance(event, EmbeddingsEvent | SlotActionEvent):
            return []  # a chat plan never embeds nor acts on slots
        return self._end(event)

    def _decided(self, call: bool) -> list[ChatStreamEvent | ChatEnd]:
        """The hidden decision's answer: a call (read as one) or free text (sent as it comes);
        what was held back while it was pending goes the same way."""
        if not self._deciding:
            return []
        self._deciding = False
        if call:
            self._parser = BoundCallParser()
        held, self._held = "".join(self._held), []
        return list(self._answer(held, None)) if held else []

    def _route(self, pieces: list[Piece], event: TokenEvent | None) -> list[ChatStreamEvent]:
        """Each piece where it belongs; the event's tokens go with its first answer piece
        (or alone, when they render as nothing)."""
        items: list[ChatStreamEvent] = []
        for piece in pieces:
            if piece.kind is PieceKind.REASONING:
                items.append(ReasoningDelta(piece.text))
            elif piece.kind is PieceKind.COMMENTARY:
                items += self._commentary(piece.text)
            else:
                items += self._answer(piece.text, event)
                event = None
        if event is not None and not event.text:
            items += self._answer("", event)
        return items

    def _answer(self, text: str, event: TokenEvent | None) -> list[ChatStreamEvent]:
        if self._deciding:
            self._held.append(text)
            return []
        if self._parser is not None:
            return list(self._parser.feed(text))
        self._answer_parts.append(text)
        ids, logprobs = (event.token_ids, event.logprobs) if event is not None else ((), ())
        # An event without text still carries the log-probabilities of tokens that render as
        # nothing (control tokens): sent, so a stream's logprobs match the whole answer's.
        if not (text or logprobs):
            return []
        return [TextDelta(text, ids, logprobs)]

    def _commentary(self, text: str) -> list[ChatStreamEvent]:
        """gpt-oss's commentary to a tool (a harmony tool call, verbatim): the live parser
        reads it; with no tools offered, a call nobody asked for is dropped (llama-server's
        parser consumes such calls too)."""
        return list(self._parser.feed(text)) if self._parser is not None else []

    def _end(self, outcome: GenerationOutcome) -> list[ChatStreamEvent | ChatEnd]:
        collected, thought = self._collected, self._thought
        if failed(outcome):
            return [ChatEnd(ChatAnswer(collected.text, (), outcome, collected.trace))]
        items: list[ChatStreamEvent | ChatEnd] = []
        if thought is not None:
            items += self._route(thought.finish(), None)
        # No decision came (a whole answer read back): the outcome says whether it was bound.
        items += self._decided(outcome.constrained)
        if self._parser is not None:
            items += self._parser.finish()
            text, calls = "".join(self._parser.text_parts), tuple(self._parser.calls)
        else:
            text, calls = "".join(self._answer_parts), ()
        answer = ChatAnswer(text, calls, outcome, collected.trace)
        if thought is not None:
            answer = replace(
                answer, reasoning=thought.reasoning, reasoning_tokens=thought.reasoning_tokens
            )
        return [*items, ChatEnd(answer)]
