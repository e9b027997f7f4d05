"""Native tool-call formats: telling them from a template, and parsing each while it streams,
whatever the pieces the text arrives in (one character at a time, random cuts, all at once)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import pytest

from server.core.templates.chat import ChatMessage, ChatTemplate, ToolSpec
from server.core.templates.tool_formats import ToolFormat, detect_tool_format
from server.core.text.reasoning import HarmonySplitter, PieceKind
from server.core.tool_calls.tool_formats_harmony import HarmonyParser
from server.core.tool_calls.tool_formats_live import LiveTools
from server.core.tool_calls.tool_stream import (
    ChatStreamEvent,
    TextDelta,
    ToolArgumentsDelta,
    ToolCallDone,
    ToolCallStart,
    ToolCallStream,
)
from tests.support.tool_templates import REPLIES, REPLY_TEXT, TEMPLATES, WEATHER_PARAMETERS

WEATHER = ToolSpec("get_weather", "The weather in a city", WEATHER_PARAMETERS)


def splits(text: str) -> list[list[str]]:
    """The ways a reply is fed: whole, one character at a time, and seeded random cuts."""
    ways = [[text], list(text)]
    for seed in range(12):
        rng, pieces, at = random.Random(seed), [], 0
        while at < len(text):
            size = rng.randint(1, 9)
            pieces.append(text[at : at + size])
            at += size
        ways.append(pieces)
    return ways


def feed(parser: ToolCallStream, pieces: Sequence[str]) -> list[ChatStreamEvent]:
    events: list[ChatStreamEvent] = []
    for piece in pieces:
        events += parser.feed(piece)
    return events + parser.finish()


def read(
    tool_format: ToolFormat, pieces: Sequence[str], tools: Sequence[ToolSpec] = (WEATHER,)
) -> tuple[str, list[tuple[str, dict[str, object]]], list[ChatStreamEvent]]:
    """The reply's text, its calls (name, arguments), and the events, checked for order: each
    call's start, its fragments (which join into its arguments), its end, indexes 0, 1, …"""
    parser = LiveTools(tool_format, tuple(tools)).parser()
    events = feed(parser, pieces)
    open_index: int | None = None
    fragments: dict[int, list[str]] = {}
    for event in events:
        match event:
            case ToolCallStart(index=index):
                assert open_index is None and index == len(fragments)
                open_index, fragments[index] = index, []
            case ToolArgumentsDelta(index=index, fragment=fragment):
                assert index == open_index and fragment
                fragments[index].append(fragment)
            case ToolCallDone(index=index, call=call):
                assert index == open_index
                assert json.loads("".join(fragments[index])) == call.arguments
                open_index = None
            case TextDelta():
                assert open_index is None  # text never arrives inside a call
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "".join(parser.text_parts)
    calls = [(call.name, call.arguments) for call in parser.calls]
    return text, calls, events


def fragment_count(events: list[ChatStreamEvent]) -> int:
    return sum(isinstance(e, ToolArgumentsDelta) for e in events)


# -- detection ------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_each_fixture_template_is_told_by_its_format(tool_format: ToolFormat) -> None:
    template = ChatTemplate(TEMPLATES[tool_format], "llama")
    assert template.tool_format is tool_format
    prompt = template.render([ChatMessage("user", "Weather?")], [WEATHER], native_tools=True)
    assert "get_weather" in prompt.prompt  # the template received the tools


@pytest.mark.parametrize(
    "source",
    [
        None,
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}",
        # <tool_call> around something other than JSON (GLM's keys and values): not Hermes
        "{% if tools %}<tool_call>{name}<arg_key>{k}</arg_key><arg_value>{v}</arg_value>"
        "</tool_call>{% endif %}",
        # Functionary v3.1 has <|python_tag|> too, but writes <function=NAME>{…}</function>
        "{% if tools %}<|python_tag|> or <function=NAME>{...}</function>{% endif %}",
        # a marker, but a template that never receives tools
        '<tool_call>{"name": x}</tool_call>{{ messages }}',
    ],
)
def test_templates_without_a_known_format(source: str | None) -> None:
    assert detect_tool_format(source) is None
    assert ChatTemplate(source, "llama").tool_format is None


def test_the_tags_of_the_tagged_formats() -> None:
    assert ChatTemplate(TEMPLATES[ToolFormat.HERMES], "qwen2").tool_call_tags == (
        "<tool_call>",
        "</tool_call>",
    )
    assert ChatTemplate(TEMPLATES[ToolFormat.LLAMA3], "llama").tool_call_tags is None


# -- every format, every split --------------------------------------------------------------------


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_a_call_reads_the_same_in_any_pieces(tool_format: ToolFormat) -> None:
    reply = REPLIES[tool_format]
    for pieces in splits(reply):
        text, calls, events = read(tool_format, pieces)
        assert text == REPLY_TEXT[tool_format]
        assert calls == [("get_weather", {"city": "Oslo", "days": 3})]
        if len(pieces) == len(reply):  # one character at a time: arguments in many pieces
            assert fragment_count(events) > 3


PARALLEL = {
    ToolFormat.HERMES: '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
    '<tool_call>\n{"name": "b", "arguments": {"y": "two"}}\n</tool_call>',
    ToolFormat.LLAMA3: '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; '
    '{"type": "function", "name": "b", "parameters": {"y": "two"}}',
    ToolFormat.MISTRAL: '[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}, "id": "abcdefghi"}, '
    '{"name": "b", "arguments": {"y": "two"}, "id": "bcdefghij"}]',
    ToolFormat.QWEN3_CODER: "<tool_call>\n<function=a>\n<parameter=x>\n1\n</parameter>\n"
    "</function>\n</tool_call>\n<tool_call>\n<function=b>\n<parameter=y>\ntwo\n</parameter>\n"
    "</function>\n</tool_call>",
    ToolFormat.HARMONY: '<|channel|>commentary to=functions.a <|constrain|>json<|message|>{"x": 1}'
    "<|call|><|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json"
    '<|message|>{"y": "two"}<|call|>',
}


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_parallel_calls_are_indexed_in_order(tool_format: ToolFormat) -> None:
    for pieces in splits(PARALLEL[tool_format]):
        text, calls, events = read(tool_format, pieces, tools=())
        assert text == ""
        assert calls == [("a", {"x": 1}), ("b", {"y": "two"})]
        starts = [e for e in events if isinstance(e, ToolCallStart)]
        assert [s.index for s in starts] == [0, 1] and starts[0].call_id != starts[1].call_id


def test_mistral_newer_form_with_call_ids_and_a_call_per_tag() -> None:
    reply = (
        'I will look. [TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Oslo"}'
        '[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}'
    )
    for pieces in splits(reply):
        text, calls, _ = read(ToolFormat.MISTRAL, pieces)
        assert text == "I will look. "
        assert calls == [("get_weather", {"city": "Oslo"}), ("get_time", {"zone": "CET"})]


def test_text_after_calls_passes_through() -> None:
    reply = 'Let me see.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\nDone, <b>ok'
    for pieces in splits(reply):
        text, calls, _ = read(ToolFormat.HERMES, pieces)
        assert text == "Let me see.\nDone, <b>ok"  # the whitespace after a call is its own
        assert calls == [("a", {})]


def test_llama3_reply_that_is_text_or_json_of_another_kind() -> None:
    for reply in [
        "The weather is fine.",
        '{"result": 5} is the answer',
        '  {"name": "Bob", "age": 3}',
    ]:
        for pieces in splits(reply):
            assert read(ToolFormat.LLAMA3, pieces)[:2] == (reply, [])
    # a call is the reply's start (or follows <|python_tag|>): JSON later in the text is text
    later = 'Call: {"name": "a", "parameters": {}}'
    assert read(ToolFormat.LLAMA3, [later])[:2] == (later, [])
    tagged = 'Calling. <|python_tag|>{"name": "a", "parameters": {"q": "x"}}'
    assert read(ToolFormat.LLAMA3, list(tagged))[:2] == ("Calling. ", [("a", {"q": "x"})])


# -- Qwen3-Coder: values typed by the tool's schema -----------------------------------------------


def test_qwen3_coder_values_follow_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": ["number", "null"]},
            "flags": {"type": "object"},
            "maybe": {"anyOf": [{"type": "boolean"}, {"type": "string"}]},
        },
    }
    tool = ToolSpec("f", "", schema)
    reply = (
        '<tool_call>\n<function=f>\n<parameter=text>\n42 is "quoted"\nand multi-line\n'
        "</parameter>\n<parameter=count>\n7\n</parameter>\n<parameter=ratio>\nnull\n</parameter>"
        '\n<parameter=flags>\n{"a": [1, 2]}\n</parameter>\n<parameter=maybe>\ntrue\n</parameter>\n'
        "<parameter=maybe_not>\nfalse\n</parameter>\n<parameter=count2>\nseven\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    expected = {
        "text": '42 is "quoted"\nand multi-line',
        "count": 7,
        "ratio": None,
        "flags": {"a": [1, 2]},
        "maybe": True,
        "maybe_not": False,  # no schema: JSON where it parses
        "count2": "seven",  # no schema, not JSON: the text
    }
    for pieces in splits(reply):
        assert read(ToolFormat.QWEN3_CODER, pieces, tools=(tool,))[:2] == ("", [("f", expected)])
    # a string value streams as it is written, not once whole
    assert fragment_count(read(ToolFormat.QWEN3_CODER, list(reply), (tool,))[2]) > 20


def test_qwen3_coder_call_without_its_tool_call_tag() -> None:
    reply = "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\nThere."
    for pieces in splits(reply):
        assert read(ToolFormat.QWEN3_CODER, pieces)[:2] == (
            "There.",
            [("get_weather", {"city": "Oslo"})],
        )
    # an unknown name after a bare <function= is text (code can hold `<function=` too)
    code = "x = <function=other>y</function>"
    assert read(ToolFormat.QWEN3_CODER, list(code))[:2] == (code, [])


# -- harmony: raw output, or the thought splitter's pieces ----------------------------------------


def test_harmony_call_with_the_recipient_in_the_role() -> None:
    reply = (
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
        '{"city": "Oslo"}<|call|>'
    )
    for pieces in splits(reply):
        assert read(ToolFormat.HARMONY, pieces)[:2] == ("", [("get_weather", {"city": "Oslo"})])


def test_harmony_parser_reads_what_the_thought_splitter_hands_on() -> None:
    """The splitter takes the analysis channel (the thought) and hands a call's message on as
    COMMENTARY pieces: fed every piece but the thought, the parser finds the call."""
    reply = REPLIES[ToolFormat.HARMONY] + "<|start|>assistant<|channel|>final<|message|>Sunny."
    for pieces in splits(reply):
        splitter, parser = HarmonySplitter(), HarmonyParser()
        handed = [p for piece in pieces for p in splitter.feed(piece)] + splitter.finish()
        thought = "".join(p.text for p in handed if p.kind is PieceKind.REASONING)
        events = feed(parser, [p.text for p in handed if p.kind is not PieceKind.REASONING])
        assert thought == "The user wants the weather."
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Sunny."
        assert [(c.name, c.arguments) for c in parser.calls] == [
            ("get_weather", {"city": "Oslo", "days": 3})
        ]


# -- malformed and cut-off calls: text, never a crash ---------------------------------------------

MALFORMED = [
    (ToolFormat.HERMES, "a <tool_call>not json</tool_call> b"),
    (ToolFormat.HERMES, 'a <tool_call>{"arguments": {}, "name": "x"}</tool_call>'),
    (ToolFormat.HERMES, 'a <tool_call>{"name": "x", "arguments": 5}</tool_call>'),
    (ToolFormat.HERMES, "<tool_call><tool_"),
    (ToolFormat.LLAMA3, '{"name": "x" "parameters": {}}'),
    (ToolFormat.LLAMA3, '<|python_tag|>brave_search.call(query="x")'),
    (ToolFormat.MISTRAL, "[TOOL_CALLS] and then prose"),
    (ToolFormat.MISTRAL, "[TOOL_CALLS][1, 2]"),
    (ToolFormat.MISTRAL, "[TOOL_CALLS]name [ARGS]{}"),
    (ToolFormat.QWEN3_CODER, "<tool_call>\nplain words\n</tool_call>"),
    (ToolFormat.QWEN3_CODER, "<tool_call>\n<function=bad name>\n</function>"),
    (ToolFormat.HARMONY, "<|channel|>commentary to=functions.f<|message|>not json<|call|>"),
    (ToolFormat.HARMONY, "<|channel|>final<|message|>Just text."),
]


@pytest.mark.parametrize(("tool_format", "reply"), MALFORMED)
def test_malformed_calls_end_as_text(tool_format: ToolFormat, reply: str) -> None:
    for pieces in splits(reply):
        text, calls, _ = read(tool_format, pieces, tools=())
        assert calls == [] and text == reply


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_a_call_cut_off_mid_arguments_is_dropped_and_text_before_it_kept(
    tool_format: ToolFormat,
) -> None:
    """Max tokens reached inside a call: no call (the client saw its start and fragments, and
    the finish reason says the length ran out); the text before it stays."""
    reply = REPLIES[tool_format]
    cut = reply[: reply.index("Oslo") + 2]
    for pieces in splits(cut):
        text, calls, events = read(tool_format, pieces)
        assert calls == [] and not any(isinstance(e, ToolCallDone) for e in events)
        assert text == REPLY_TEXT[tool_format]


def test_a_call_whose_end_tag_never_comes_is_still_whole() -> None:
    """gpt-oss's <|call|> and Mistral's end are end-of-generation tokens, often not in the text:
    arguments that are whole make the call."""
    for tool_format, reply in [
        (ToolFormat.HARMONY, REPLIES[ToolFormat.HARMONY].removesuffix("<|call|>")),
        (ToolFormat.HERMES, REPLIES[ToolFormat.HERMES].removesuffix("\n</tool_call>")),
    ]:
        assert read(tool_format, list(reply))[1] == [("get_weather", {"city": "Oslo", "days": 3})]


def test_arguments_written_as_a_json_string_are_decoded() -> None:
    reply = '<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
    for pieces in splits(reply):
        assert read(ToolFormat.HERMES, pieces)[1] == [("a", {"x": 1})]


# Pieces of every format's markup, shuffled into replies no model should write.
_ATOMS = [
    *("<tool_call>", "</tool_call>", "<|python_tag|>", ";", "[TOOL_CALLS]", "[ARGS]"),
    *("[CALL_ID]", "<function=", "<function=get_weather>", "<parameter=", "<parameter=days>"),
    *("</parameter>", "</function>", ">", "<|channel|>", "<|start|>", "<|message|>"),
    *("<|call|>", " to=functions.f", "commentary", '"name"', '"arguments"', '"parameters"'),
    *("{", "}", "[", "]", ":", ",", '"x"', '"', "\\", " ", "\n", "a", "1"),
]


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_any_jumble_of_markup_parses_the_same_in_any_pieces(tool_format: ToolFormat) -> None:
    """Never a failure, and the same reading whether the text comes whole or a character at a
    time."""
    for seed in range(300):
        rng = random.Random(seed)
        reply = "".join(rng.choice(_ATOMS) for _ in range(rng.randint(1, 30)))
        whole = read(tool_format, [reply])[:2]
        assert read(tool_format, list(reply))[:2] == whole, reply
