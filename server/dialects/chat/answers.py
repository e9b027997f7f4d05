"""A finished reply read back from engine events, dialect-neutral: its text, tokens and
log-probabilities, tool calls and thought, and whether it failed.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.core.templates.chat import (
    ToolCall,
)
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    TokenEvent,
    TokenLogprob,
)


@dataclass(frozen=True, slots=True)
class TokenTrace:
    """The generated tokens of a reply, and their log-probabilities when asked."""

    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    """A finished chat reply: its text, the tool calls it made, its thought and its tokens."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    outcome: GenerationOutcome
    tokens: TokenTrace = TokenTrace()
    reasoning: str = ""
    reasoning_tokens: int = 0


class TokenCollector:
    """Gathers a reply's events: its text, tokens and log-probabilities."""

    def __init__(self) -> None:
        self.events: list[TokenEvent] = []
        self.token_ids: list[int] = []
        self.logprobs: list[TokenLogprob] = []

    def add(self, event: TokenEvent) -> None:
        self.events.append(event)
        self.token_ids += event.token_ids
        self.logprobs += event.logprobs

    @property
    def text(self) -> str:
        return "".join(event.text for event in self.events)

    @property
    def trace(self) -> TokenTrace:
        return TokenTrace(tuple(self.token_ids), tuple(self.logprobs))


def failed(outcome: GenerationOutcome) -> bool:
    return outcome.finish_reason is FinishReason.ERROR


def failure_message(outcome: GenerationOutcome) -> str:
    return outcome.error or "generation failed"
