"""The thought split from the answer while text streams (server/core/text/reasoning.py): tags cut at
every place, a thought the template opened, one left open, harmony channels."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from server.core.text.reasoning import (
    HARMONY,
    HarmonySplitter,
    Piece,
    PieceKind,
    TagSplitter,
    ThinkingSyntax,
    new_splitter,
    prompt_opens_thought,
    thinking_syntax,
)

ANSWER, REASONING, COMMENTARY = PieceKind.ANSWER, PieceKind.REASONING, PieceKind.COMMENTARY
Splitter = TagSplitter | HarmonySplitter


def run(splitter: Splitter, pieces: Sequence[str]) -> list[list[Piece]]:
    """What each piece released (the last entry: what `finish` released)."""
    return [splitter.feed(piece) for piece in pieces] + [splitter.finish()]


def joined(released: list[list[Piece]], kind: PieceKind) -> str:
    return "".join(piece.text for batch in released for piece in batch if piece.kind is kind)


def cuts(text: str) -> list[list[str]]:
    """`text` cut in two at every place, and in single characters."""
    return [[text[:at], text[at:]] for at in range(len(text) + 1)] + [list(text)]


THOUGHT_TEXT = "  <think>\nLet me see: 2+2.\n</think>\n\nIt is 4."


@pytest.mark.parametrize("pieces", cuts(THOUGHT_TEXT))
def test_a_thought_the_model_opens_splits_wherever_the_pieces_are_cut(pieces: list[str]) -> None:
    released = run(TagSplitter(), pieces)
    assert joined(released, REASONING) == "Let me see: 2+2.\n"
    assert joined(released, ANSWER) == "It is 4."


@pytest.mark.parametrize("pieces", cuts("Thinking it over</think>Yes."))
def test_a_thought_the_template_opened_starts_inside(pieces: list[str]) -> None:
    released = run(TagSplitter(start_inside=True), pieces)
    assert joined(released, REASONING) == "Thinking it over"
    assert joined(released, ANSWER) == "Yes."


def test_a_template_opened_thought_takes_a_repeated_opening_tag() -> None:
    released = run(TagSplitter(start_inside=True), ["<th", "ink>", "\nhm", "</think>ok"])
    assert joined(released, REASONING) == "hm"
    assert joined(released, ANSWER) == "ok"


def test_text_that_cannot_be_a_tag_is_never_held() -> None:
    splitter = TagSplitter()
    assert splitter.feed("Hello") == [Piece(ANSWER, "Hello")]
    assert splitter.feed(" <think>") == [Piece(ANSWER, " <think>")]  # not at the start: text
    inside = TagSplitter(start_inside=True)
    assert inside.feed("a < b") == [Piece(REASONING, "a < b")]
    assert inside.feed(" and </") == [Piece(REASONING, " and ")]  # "</" may be the end tag
    assert inside.feed("b>") == [Piece(REASONING, "</b>")]
    assert inside.in_thought


def test_an_unclosed_thought_is_all_reasoning() -> None:
    released = run(TagSplitter(), ["<think>", "still going", " </thi"])
    assert joined(released, REASONING) == "still going </thi"
    assert joined(released, ANSWER) == ""


def test_a_reply_without_a_thought_is_the_answer_as_written() -> None:
    released = run(TagSplitter(), ["  ", "<thi"])  # held: it might have been the tag
    assert joined(released, ANSWER) == "  <thi"
    released = run(TagSplitter(), ["\n", "Plain ", "words"])
    assert joined(released, ANSWER) == "\nPlain words"


def test_other_tag_pairs() -> None:
    released = run(TagSplitter(("[THINK]", "[/THINK]")), ["[THI", "NK]why[/TH", "INK]because"])
    assert (joined(released, REASONING), joined(released, ANSWER)) == ("why", "because")


def test_in_thought_follows_the_text() -> None:
    splitter = TagSplitter()
    assert not splitter.in_thought
    splitter.feed("<think>")
    assert splitter.in_thought
    splitter.feed("x</think>")
    assert not splitter.in_thought


HARMONY_REPLY = (
    "<|channel|>analysis<|message|>User wants 4.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>4."
)


@pytest.mark.parametrize("pieces", cuts(HARMONY_REPLY))
def test_harmony_channels_wherever_the_pieces_are_cut(pieces: list[str]) -> None:
    released = run(HarmonySplitter(), pieces)
    assert joined(released, REASONING) == "User wants 4."
    assert joined(released, ANSWER) == "4."
    assert joined(released, COMMENTARY) == ""


def test_harmony_analysis_opened_by_the_prompt() -> None:
    released = run(HarmonySplitter(start_inside=True), ["Hmm", "<|end|><|start|>assistant"])
    released += run(HarmonySplitter(), [])  # a fresh splitter releases nothing
    assert joined(released, REASONING) == "Hmm"
    assert joined(released, ANSWER) == ""


@pytest.mark.parametrize(
    "reply",
    [
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city": "Oslo"}<|call|>',
        ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}<|call|>',
    ],
)
def test_harmony_commentary_to_a_tool_is_passed_on_verbatim(reply: str) -> None:
    thought = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
    released = run(HarmonySplitter(), [thought[:17], thought[17:], reply[:30], reply[30:]])
    assert joined(released, REASONING) == "Need weather."
    assert joined(released, COMMENTARY) == reply
    assert joined(released, ANSWER) == ""


def test_harmony_preamble_and_stray_commentary() -> None:
    reply = (
        "<|channel|>commentary<|message|>Checking…<|end|>"
        "<|start|>assistant<|channel|>commentary to=assistant<|channel|>analysis<|message|>"
        "think<|end|><|start|>assistant<|channel|>final<|message|>Done"
    )
    released = run(HarmonySplitter(), [reply])
    assert joined(released, ANSWER) == "Checking…Done"  # a preamble to the user is answer
    assert joined(released, REASONING) == "think"


def test_text_that_is_not_harmony_is_the_answer() -> None:
    splitter = HarmonySplitter()
    assert splitter.feed("Hi there") == [Piece(ANSWER, "Hi there")]
    assert splitter.feed("<|channel|>") == [Piece(ANSWER, "<|channel|>")]


def test_harmony_cut_off_mid_header_drops_the_markup() -> None:
    released = run(HarmonySplitter(), ["<|channel|>analysis<|message|>a<|end|><|start|>assi"])
    assert joined(released, REASONING) == "a"
    assert joined(released, ANSWER) == ""


QWEN3_TEMPLATE = (
    "{%- if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>"
    "{%- endif %}{% if enable_thinking is false %}<think>\n\n</think>{% endif %}"
)


def test_which_templates_think() -> None:
    assert thinking_syntax(QWEN3_TEMPLATE) == ThinkingSyntax(("<think>", "</think>"))
    assert thinking_syntax("{{ content.split('</think>')[-1] }}") == ThinkingSyntax()
    assert thinking_syntax("[THINK]{{ m }}[/THINK]") == ThinkingSyntax(("[THINK]", "[/THINK]"))
    assert thinking_syntax("{% if enable_thinking %}/think{% endif %}") == ThinkingSyntax()
    harmony = "<|start|>{{ role }}<|channel|>final<|message|>{{ content }}<|end|>"
    assert thinking_syntax(harmony) == HARMONY
    chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>"
    assert thinking_syntax(chatml) is None
    assert thinking_syntax(None) is None
    assert isinstance(new_splitter(HARMONY, False), HarmonySplitter)
    assert isinstance(new_splitter(ThinkingSyntax(), True), TagSplitter)


def test_whether_the_prompt_opens_the_thought() -> None:
    tags = ("<think>", "</think>")
    assert prompt_opens_thought("<|Assistant|><think>\n", tags)
    assert not prompt_opens_thought("<|im_start|>assistant\n<think>\n\n</think>\n\n", tags)
    assert not prompt_opens_thought("<|im_start|>user\nWhat is <think>?<|im_end|>\n", tags)
    assert prompt_opens_thought("<|im_start|>assistant\n<think>Hm", tags, prefill="<think>Hm")
    assert not prompt_opens_thought("…<think>a</think>b", tags, prefill="<think>a</think>b")
    harmony = "<|start|>assistant<|channel|>analysis<|message|>"
    assert prompt_opens_thought(harmony, HARMONY.tags)
