"""Reading a chat generation with tools offered (server/dialects/chat/chat_reading.py): the answer
streams as soon as the hidden tool decision says "no tool", a bound call streams as it is
written, and a whole answer read back is the same as the stream's."""

from __future__ import annotations

from server.core.tool_calls.tool_stream import TextDelta, ToolArgumentsDelta, ToolCallStart
from server.core.types import (
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    TokenEvent,
    ToolDecision,
)
from server.dialects.chat.answers import TokenCollector
from server.dialects.chat.chat_reading import ChatEnd, ChatReader, read_answer
from server.dialects.chat.plans import ChatPlan

SCHEMA = {"type": "object"}


def plan(decision: bool) -> ChatPlan:
    generation = GenerationRequest(
        "r",
        "prompt",
        32,
        json_schema=SCHEMA,
        schema_decision_prompt="need a tool?" if decision else None,
    )
    return ChatPlan(generation, user_stops=(), constrained_tools=True)


def test_after_a_no_the_answer_streams_token_by_token() -> None:
    reader = ChatReader(plan(decision=True))
    assert reader.read(ToolDecision(call=False)) == []
    pieces = ["Hel", "lo", " there"]
    streamed = [reader.read(TokenEvent(piece, (index,))) for index, piece in enumerate(pieces)]
    assert [[item.text for item in items if isinstance(item, TextDelta)] for items in streamed] == [
        [piece] for piece in pieces
    ]
    end = reader.read(GenerationOutcome(FinishReason.STOP))
    assert isinstance(end[-1], ChatEnd) and end[-1].answer.text == "Hello there"
    assert not any(isinstance(item, TextDelta) for item in end)  # not sent a second time


def test_after_a_yes_the_call_is_announced_while_it_is_written() -> None:
    reader = ChatReader(plan(decision=True))
    reader.read(ToolDecision(call=True))
    items = []
    for piece in ['{"name": "f", ', '"arguments": {"a"', ": 1}}"]:
        items.append(reader.read(TokenEvent(piece)))
    assert any(isinstance(item, ToolCallStart) for item in items[1])
    assert any(isinstance(item, ToolArgumentsDelta) for item in items[2])
    end = reader.read(GenerationOutcome(FinishReason.STOP, constrained=True))[-1]
    assert isinstance(end, ChatEnd)
    assert [(c.name, c.arguments) for c in end.answer.tool_calls] == [("f", {"a": 1})]


def test_a_required_call_streams_without_a_decision_and_a_cut_one_stays_a_call() -> None:
    reader = ChatReader(plan(decision=False))
    first = reader.read(TokenEvent('{"name": "f", "arguments": {"a": "partial'))
    assert any(isinstance(item, ToolCallStart) for item in first)
    end = reader.read(GenerationOutcome(FinishReason.LENGTH, constrained=True))[-1]
    assert isinstance(end, ChatEnd)
    assert end.answer.text == ""
    assert [(c.name, c.arguments) for c in end.answer.tool_calls] == [("f", {"a": "partial"})]


def test_a_whole_answer_read_back_decides_by_the_outcome() -> None:
    collected = TokenCollector()
    collected.add(TokenEvent("No tool needed."))
    free = read_answer(plan(True), collected, GenerationOutcome(FinishReason.STOP))
    assert free.text == "No tool needed." and free.tool_calls == ()
    collected = TokenCollector()
    collected.add(TokenEvent('{"name": "f", "arguments": {}}'))
    bound = read_answer(
        plan(True), collected, GenerationOutcome(FinishReason.STOP, constrained=True)
    )
    assert bound.text == "" and [c.name for c in bound.tool_calls] == ["f"]
