"""A grammar-bound tool call read while it streams (server/core/tool_calls/tool_formats_bound.py), a
cut call closed where it stops, and the loop bound (server/core/text/loops.py)."""

from __future__ import annotations

import json

import pytest

from server.core.text.loops import LoopWatch, ends_in_loop
from server.core.tool_calls.tool_formats_bound import BoundCallParser, closed_json
from server.core.tool_calls.tool_stream import (
    ChatStreamEvent,
    TextDelta,
    ToolArgumentsDelta,
    ToolCallDone,
    ToolCallStart,
)

CALL = '{"name": "get_weather", "arguments": {"city": "Oslo", "days": [1, 2]}}'


def fed(text: str, piece: int = 3) -> tuple[list[list[ChatStreamEvent]], BoundCallParser]:
    """The parser's events for `text` fed `piece` characters at a time, then its finish."""
    parser = BoundCallParser()
    batches = [parser.feed(text[at : at + piece]) for at in range(0, len(text), piece)]
    return [*batches, parser.finish()], parser


def test_the_name_is_announced_before_the_end_and_the_arguments_stream() -> None:
    batches, parser = fed(CALL)
    events = [event for batch in batches for event in batch]
    start = next(
        i for i, batch in enumerate(batches) if any(isinstance(e, ToolCallStart) for e in batch)
    )
    # Announced as its arguments begin (the name is whole by then), long before the end.
    assert start <= CALL.index('{"city"') // 3 < len(batches) - 8
    fragments = [e.fragment for e in events if isinstance(e, ToolArgumentsDelta)]
    assert len(fragments) > 3
    assert json.loads("".join(fragments)) == {"city": "Oslo", "days": [1, 2]}
    done = [e for e in events if isinstance(e, ToolCallDone)]
    assert [d.call.name for d in done] == ["get_weather"]
    assert parser.calls[0].arguments == {"city": "Oslo", "days": [1, 2]}
    assert not any(isinstance(e, TextDelta) for e in events)


def test_a_reply_that_is_not_a_call_is_text() -> None:
    batches, parser = fed("Hello there, no call.")
    events = [event for batch in batches for event in batch]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there, no call."
    assert parser.calls == []


def test_a_call_cut_inside_its_arguments_is_still_the_call_closed_where_it_stops() -> None:
    cut = CALL[: CALL.index("Oslo") + 2]  # ... "city": "Os
    batches, parser = fed(cut)
    events = [event for batch in batches for event in batch]
    assert [call.name for call in parser.calls] == ["get_weather"]
    assert parser.calls[0].arguments == {"city": "Os"}
    fragments = "".join(e.fragment for e in events if isinstance(e, ToolArgumentsDelta))
    assert json.loads(fragments) == {"city": "Os"}  # the joined fragments parse too
    assert not any(isinstance(e, TextDelta) for e in events)


def test_a_call_cut_before_its_arguments_is_text() -> None:
    _, parser = fed('{"name": "get_wea')
    assert parser.calls == [] and "".join(parser.text_parts) == '{"name": "get_wea'


@pytest.mark.parametrize(
    ("cut", "closed"),
    [
        ('{"a": "hel', '{"a": "hel"}'),
        ('{"a": 1, "b', '{"a": 1}'),
        ('{"a": [1, 2, {"x": "y', '{"a": [1, 2, {"x": "y"}]}'),
        ('{"a": 1,', '{"a": 1}'),
        ('{"a": "x\\', '{"a": "x"}'),
        ('{"a": "x\\u00', '{"a": "x"}'),
        ('{"a": tr', "{}"),
        ("", "{}"),
        ('{"a": {"b": 2}}', '{"a": {"b": 2}}'),
    ],
)
def test_closed_json(cut: str, closed: str) -> None:
    assert closed_json(cut) == closed


def test_a_short_span_repeated_is_a_loop_and_ordinary_text_is_not() -> None:
    looping = '{"when": "2024' + "-10-22-12:45:00" * 8
    assert ends_in_loop(looping)
    assert not ends_in_loop(looping[:-16])  # seven repeats: not yet
    assert not ends_in_loop('{"numbers": [' + "0, " * 20)  # 60 characters: under the bound
    prose = "The weather in Oslo is cold and clear, with light wind from the north. " * 2
    assert not ends_in_loop(prose)  # a span longer than the bound repeated twice
    watch = LoopWatch()
    pieces = ["-10-22", "-12:45:00"] * 8
    assert [watch.looping_after(piece) for piece in pieces].index(True) == len(pieces) - 1


def test_a_call_cut_before_its_arguments_is_the_named_call_without_arguments() -> None:
    batches, parser = fed('{ "name": "get_weather", "arguments')
    events = [event for batch in batches for event in batch]
    assert [(c.name, c.arguments) for c in parser.calls] == [("get_weather", {})]
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["get_weather"]
    assert not any(isinstance(e, TextDelta) for e in events)
