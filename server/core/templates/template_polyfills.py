"""What a chat template does not show of a conversation with tools, written in for it.

A template made before tool calling (SmolLM2's ChatML, Gemma 3's) renders an assistant turn by
its `content` alone: a turn that called a tool comes out empty, so the model reads the tool's
result without the call it made and loses the thread. llama.cpp's template engine probes each
template for what it shows and fills in ("polyfills") the rest; so does Hearth. Each Jinja
template is rendered once with a probe conversation, and then:
- a call the template does not show is written into its turn's text as the JSON object the
  tool instructions teach (`{"name": …, "arguments": …}`, server/core/templates/chat.py), so the
  model sees its own calls in the very format it is asked to write them;
- a tool result the template drops (or a `tool` role it refuses) becomes a user turn that says
  whose result it is, as the built-in turn formats write it ("Result of get_weather: …").

It works on the messages as the template receives them (dicts), so every dialect's history
(OpenAI `tool_calls`, Anthropic `tool_use`/`tool_result`, Ollama `tool_calls`) gets the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from server.core.templates.template_jinja import ChatTemplateError

JinjaMessage = dict[str, Any]
_PROBE_TOOL = "hearth_probe_tool"
_PROBE_VALUE = "hearth_probe_value"
_PROBE_RESULT = "hearth_probe_result"


@dataclass(frozen=True, slots=True)
class TemplateShows:
    """What of a conversation with tools a template renders."""

    tool_calls: bool = True  # an assistant turn's calls (their name and arguments)
    tool_results: bool = True  # a `tool` turn's content


def probe_template(render: Callable[[list[JinjaMessage]], str]) -> TemplateShows:
    """What the template behind `render` (messages → prompt, no generation prompt) shows."""
    user: JinjaMessage = {"role": "user", "content": "What is the weather?"}
    call: JinjaMessage = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_probe",
                "type": "function",
                "function": {"name": _PROBE_TOOL, "arguments": {"city": _PROBE_VALUE}},
            }
        ],
    }
    result: JinjaMessage = {
        "role": "tool",
        "content": _PROBE_RESULT,
        "tool_call_id": "call_probe",
        "name": _PROBE_TOOL,
    }
    calls = _shows(render, [user, call], (_PROBE_TOOL, _PROBE_VALUE))
    results = _shows(render, [user, call, result], (_PROBE_RESULT,))
    return TemplateShows(tool_calls=calls, tool_results=results)


def _shows(
    render: Callable[[list[JinjaMessage]], str],
    messages: list[JinjaMessage],
    marks: tuple[str, ...],
) -> bool:
    try:
        prompt = render(messages)
    except ChatTemplateError:  # it refuses such a conversation: it does not show it either
        return False
    return all(mark in prompt for mark in marks)


def needs_polyfill(messages: list[JinjaMessage]) -> bool:
    """Whether the conversation has anything a template might not show."""
    return any(m.get("tool_calls") or m["role"] == "tool" for m in messages)


def polyfilled(messages: list[JinjaMessage], shows: TemplateShows) -> list[JinjaMessage]:
    """The conversation with what the template does not show written into what it does."""
    filled: list[JinjaMessage] = []
    for message in messages:
        if message.get("tool_calls") and not shows.tool_calls:
            message = _calls_as_text(message)
        elif message["role"] == "tool" and not shows.tool_results:
            message = _result_as_user_turn(message)
        filled.append(message)
    return filled


def _calls_as_text(message: JinjaMessage) -> JinjaMessage:
    calls = [
        json.dumps({"name": call["function"]["name"], "arguments": call["function"]["arguments"]})
        for call in message["tool_calls"]
    ]
    text = "\n".join([message["content"], *calls] if message["content"] else calls)
    written = {key: value for key, value in message.items() if key != "tool_calls"}
    return {**written, "content": text}


def _result_as_user_turn(message: JinjaMessage) -> JinjaMessage:
    label = message.get("name") or message.get("tool_call_id") or "tool"
    return {"role": "user", "content": f"Result of {label}: {message['content']}"}
