"""Chat rendering: Gemma's built-in turn format, a model's own Jinja template, tool calls."""

from __future__ import annotations

import pytest

from server.core.templates.chat import (
    ChatMessage,
    ChatTemplate,
    ChatTemplateError,
    PromptEnd,
    ToolCall,
    ToolSpec,
)
from server.core.tool_calls.tool_formats_bound import tool_call_schema

GEMMA = ChatTemplate(None, "gemma3", bos_token="<bos>")


def test_gemma_turns_with_system_folded_into_the_first_user_turn() -> None:
    rendered = GEMMA.render(
        [
            ChatMessage("system", "Be brief."),
            ChatMessage("user", "Hi"),
            ChatMessage("assistant", "Hello!"),
            ChatMessage("developer", "Stay kind."),
            ChatMessage("user", "Bye"),
        ]
    )
    assert rendered.prompt == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nStay kind.\n\nBye<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    assert rendered.stop == ("<end_of_turn>",)


def test_tool_calls_and_results_render_as_text() -> None:
    rendered = GEMMA.render(
        [
            ChatMessage("user", "Weather?"),
            ChatMessage("assistant", tool_calls=(ToolCall("c1", "get_weather", {"city": "Oslo"}),)),
            ChatMessage("tool", "-3 C", tool_call_id="c1", name="get_weather"),
        ]
    )
    assert '{"name": "get_weather", "arguments": {"city": "Oslo"}}' in rendered.prompt
    assert "Result of get_weather: -3 C" in rendered.prompt


def test_tools_are_listed_in_the_system_text() -> None:
    tools = [ToolSpec("lookup", "Find a word", {"type": "object"})]
    prompt = GEMMA.render([ChatMessage("user", "Define cat")], tools).prompt
    assert "You can call these tools" in prompt and '"name": "lookup"' in prompt


def test_unknown_role_is_a_template_error() -> None:
    with pytest.raises(ChatTemplateError):
        GEMMA.render([ChatMessage("narrator", "Once")])


def test_model_jinja_template_is_used_when_present() -> None:
    source = (
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    template = ChatTemplate(source, "llama", bos_token="<s>", eos_token="</s>")
    rendered = template.render([ChatMessage("system", "S"), ChatMessage("user", "U")])
    assert rendered.prompt == "[system]S[user]U[assistant]"
    assert rendered.stop == ("</s>",)


def test_jinja_raise_exception_becomes_a_template_error() -> None:
    template = ChatTemplate("{{ raise_exception('roles must alternate') }}", "llama")
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        template.render([ChatMessage("user", "U")])


def test_tool_call_schema() -> None:
    tools = [ToolSpec("a", parameters={"type": "object"}), ToolSpec("b")]
    assert len(tool_call_schema(tools)["oneOf"]) == 2
    assert len(tool_call_schema(tools, only="b")["oneOf"]) == 1
    with pytest.raises(ChatTemplateError):
        tool_call_schema(tools, only="missing")


PREFILLED = [
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "Hi"),
    ChatMessage("assistant", "Once upon"),
]


def test_gemma_prompt_endings() -> None:
    """A continued final assistant message stays open; NONE opens no reply turn; a system
    text with no user turn after it is a user turn of its own, before the assistant's."""
    assert GEMMA.render(PREFILLED, end=PromptEnd.CONTINUE).prompt == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nOnce upon"
    )
    assert GEMMA.render(PREFILLED[:2], end=PromptEnd.NONE).prompt == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
    )
    alone = [ChatMessage("system", "Tell a story."), ChatMessage("assistant", "Once")]
    assert GEMMA.render(alone, end=PromptEnd.CONTINUE).prompt == (
        "<bos><start_of_turn>user\nTell a story.<end_of_turn>\n<start_of_turn>model\nOnce"
    )
    empty = [ChatMessage("user", "Hi"), ChatMessage("assistant", "")]
    assert GEMMA.render(empty, end=PromptEnd.CONTINUE).prompt == GEMMA.render(empty[:1]).prompt


def test_jinja_prompt_endings() -> None:
    source = (
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    template = ChatTemplate(source, "llama")
    assert template.render(PREFILLED, end=PromptEnd.CONTINUE).prompt == (
        "<system>Be brief.</system><user>Hi</user><assistant>Once upon"
    )
    assert template.render(PREFILLED[:2], end=PromptEnd.NONE).prompt == (
        "<system>Be brief.</system><user>Hi</user>"
    )
    hiding = ChatTemplate("{% for m in messages %}[{{ m.role }}]{% endfor %}", "llama")
    with pytest.raises(ChatTemplateError, match="cannot be continued"):
        hiding.render(PREFILLED, end=PromptEnd.CONTINUE)


def test_only_a_final_assistant_text_can_be_continued() -> None:
    with pytest.raises(ChatTemplateError, match="only a final assistant message"):
        GEMMA.render(PREFILLED[:2], end=PromptEnd.CONTINUE)
    call = ChatMessage("assistant", "x", tool_calls=(ToolCall("c1", "f", {}),))
    with pytest.raises(ChatTemplateError, match="tool calls"):
        GEMMA.render([ChatMessage("user", "Hi"), call], end=PromptEnd.CONTINUE)
