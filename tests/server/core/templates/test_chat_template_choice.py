"""Templates under the user's control, without a model: template variables (the server's and a
request's), where a template came from, every failure a ChatTemplateError, and the built-in
templates `--chat-template NAME` picks."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from server.core.templates.chat import (
    ChatMessage,
    ChatTemplate,
    ChatTemplateError,
    ToolCall,
    ToolSpec,
)
from server.core.templates.named_templates import NAMED_TEMPLATES, named_template

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "chat_templates"
MARKED = (FIXTURES / "marked.jinja").read_text()
HI = [ChatMessage("user", "Hi")]


def marked(**kwargs: object) -> ChatTemplate:
    return ChatTemplate(MARKED, "llama", origin="the file marked.jinja", kwargs=kwargs)


def test_the_server_s_variables_reach_the_template_and_a_request_s_win() -> None:
    server_wide = marked(greeting="HELLO", enable_thinking=False)
    assert server_wide.render(HI).prompt.endswith("assistant\n[NOTHINK HELLO]\n")
    asked = server_wide.with_kwargs({"enable_thinking": True})
    assert asked.render(HI).prompt.endswith("[THINK HELLO]\n")
    assert asked.kwargs == {"greeting": "HELLO", "enable_thinking": True}
    assert server_wide.kwargs == {"greeting": "HELLO", "enable_thinking": False}  # unchanged
    assert server_wide.with_kwargs(None) is server_wide
    # Nothing said: on, as llama.cpp tells every template (its patched templates read
    # `{% if not enable_thinking %}` and would close every thought otherwise).
    assert marked().render(HI).prompt.endswith("[THINK]\n")


def test_the_conversation_s_own_names_win_over_template_variables() -> None:
    template = marked(messages=[], add_generation_prompt=False)
    assert "<|im_start|>user\nHi" in template.render(HI).prompt
    assert template.render(HI).prompt.endswith("[THINK]\n")


def test_templates_get_llama_cpp_s_date_and_firefunction_s_functions() -> None:
    """Llama 3.x templates print `date_string` (else a fixed day in 2024), FireFunction's
    `datetime` and its tools as one JSON text, `functions`; llama-server gives all three."""
    shows = ChatTemplate("{{ date_string }}|{{ datetime }}|{{ functions }}", "llama")
    today = date.today()
    plain = shows.render(HI).prompt
    assert plain == f"{today:%d %b %Y}|{today:%b %d %Y}|"
    tool = ToolSpec("lookup", "Looks a word up", {"type": "object", "properties": {}})
    with_tools = shows.render(HI, tools=[tool], native_tools=True).prompt
    functions = json.loads(with_tools.split("|", 2)[2])
    assert functions[0]["function"]["name"] == "lookup"
    assert shows.with_kwargs({"date_string": "1 Jan 2000"}).render(HI).prompt.startswith("1 Jan")


def test_where_a_template_came_from_is_said() -> None:
    assert marked().origin == "the file marked.jinja"
    assert ChatTemplate("{{ 'x' }}", "llama").origin == "the model's own"
    assert ChatTemplate(None, "gemma3").origin == "Hearth's built-in gemma turn format"
    assert ChatTemplate(None, "llama").origin == "Hearth's built-in chatml turn format"
    assert marked().source == MARKED and ChatTemplate(None, "llama").source is None


def test_every_way_a_template_fails_is_a_template_error_naming_it() -> None:
    with pytest.raises(ChatTemplateError, match=r"\(the file marked.jinja\) failed: .*int"):
        marked(explode=True).render(HI)
    with pytest.raises(ChatTemplateError, match="refused this: this template refuses"):
        marked().render([ChatMessage("user", "refuse me")])
    calling = ChatTemplate("{{ messages[0].content.nothing() }}", "llama")
    with pytest.raises(ChatTemplateError, match=r"\(the model's own\) failed"):
        calling.render(HI)


def test_a_template_that_does_not_compile_is_refused_when_made() -> None:
    with pytest.raises(ChatTemplateError, match="line 1: unexpected '}'"):
        ChatTemplate((FIXTURES / "broken.jinja").read_text(), "llama")


def test_model_templates_may_use_loop_controls_and_tojson_options() -> None:
    source = (
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{{ {'b': 1, 'a': m.content} | tojson(sort_keys=True) }}{% endfor %}"
    )
    rendered = ChatTemplate(source, "llama").render([*HI, ChatMessage("user", "again")])
    assert rendered.prompt == '{"a": "Hi", "b": 1}'


CONVERSATION = [
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "Hi"),
    ChatMessage("assistant", "Hello!"),
    ChatMessage("user", "Bye"),
]


def test_named_templates_follow_their_formats() -> None:
    def prompt(name: str) -> str:
        source = named_template(name)
        assert source is not None
        return (
            ChatTemplate(source, "llama", origin=f"the built-in {name}").render(CONVERSATION).prompt
        )

    assert prompt("chatml") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert prompt("llama3") == (
        "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert prompt("GEMMA") == (  # names are matched in any case
        "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!"
        "<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    )
    assert prompt("mistral-v7") == (
        "[SYSTEM_PROMPT] Be brief.[/SYSTEM_PROMPT][INST] Hi[/INST] Hello!</s>[INST] Bye[/INST]"
    )
    assert prompt("llama2-sys") == (
        "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello!</s>[INST] Bye [/INST]"
    )
    assert prompt("deepseek3") == (
        "Be brief.\n\n<\uff5cUser\uff5c>Hi<\uff5cAssistant\uff5c>Hello!"
        "<\uff5cend\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>Bye<\uff5cAssistant\uff5c>"
    )
    assert named_template("no-such-format") is None


@pytest.mark.parametrize("name", sorted(NAMED_TEMPLATES))
def test_each_named_template_renders_tool_calls_and_results_as_text(name: str) -> None:
    template = ChatTemplate(NAMED_TEMPLATES[name], "llama", origin=name)
    call = ToolCall("c1", "get_weather", {"city": "Oslo"})
    conversation = [
        *CONVERSATION[:2],
        ChatMessage("assistant", tool_calls=(call,)),
        ChatMessage("tool", "-3 C", tool_call_id="c1", name="get_weather"),
    ]
    prompt = template.render(conversation).prompt
    assert '{"name": "get_weather", "arguments": {"city": "Oslo"}}' in prompt
    assert "-3 C" in prompt and "Hi" in prompt and "Be brief." in prompt
