"""Tool calls and results a chat template does not show, written in for it
(server/core/templates/template_polyfills.py): the model sees its own calls in the format it is
taught."""

from __future__ import annotations

import json

from server.core.templates.chat import ChatMessage, ChatTemplate, ToolCall

# SmolLM2-135M-Instruct's own template (ChatML that renders `content` alone).
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# A template that refuses any role but user and assistant (as some older ones do).
STRICT = (
    "{% for message in messages %}{% if message['role'] not in ['user', 'assistant'] %}"
    "{{ raise_exception('roles must be user or assistant') }}{% endif %}"
    "[{{ message['role'] }}] {{ message['content'] }}\n{% endfor %}"
)
# A template that shows calls and results itself (Hermes-like).
SHOWING = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
    "{% for c in m.get('tool_calls', []) %}<tool_call>{{ c['function'] | tojson }}</tool_call>"
    "{% endfor %}</{{ m['role'] }}>{% endfor %}"
)
CALL = ToolCall("call_1", "get_weather", {"city": "Oslo"})
CONVERSATION = [
    ChatMessage("user", "Weather in Oslo?"),
    ChatMessage("assistant", "", tool_calls=(CALL,)),
    ChatMessage("tool", "cold, -3 C", tool_call_id="call_1", name="get_weather"),
]


def test_a_call_the_template_would_drop_is_written_into_its_turn() -> None:
    prompt = ChatTemplate(CHATML, "llama").render(CONVERSATION).prompt
    written = json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})
    assert f"<|im_start|>assistant\n{written}<|im_end|>" in prompt
    assert "<|im_start|>tool\ncold, -3 C<|im_end|>" in prompt  # shown already: left as it is


def test_a_tool_role_the_template_refuses_becomes_a_user_turn() -> None:
    prompt = ChatTemplate(STRICT, "llama").render(CONVERSATION).prompt
    assert "[user] Result of get_weather: cold, -3 C" in prompt
    assert '[assistant] {"name": "get_weather", "arguments": {"city": "Oslo"}}' in prompt


def test_a_template_that_shows_calls_is_left_alone() -> None:
    prompt = ChatTemplate(SHOWING, "llama").render(CONVERSATION).prompt
    assert prompt.count("get_weather") == 1  # its own rendering, no second copy in the text
    assert "<tool>cold, -3 C</tool>" in prompt


def test_text_beside_a_call_is_kept_before_it() -> None:
    said = ChatMessage("assistant", "Let me look.", tool_calls=(CALL,))
    prompt = ChatTemplate(CHATML, "llama").render([CONVERSATION[0], said]).prompt
    assert 'Let me look.\n{"name": "get_weather"' in prompt
