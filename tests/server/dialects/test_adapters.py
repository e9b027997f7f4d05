"""Dialect adapters turn wire messages into the same chat turns."""

from __future__ import annotations

from server.core.templates.chat import ChatMessage, ToolCall
from server.dialects.anthropic.adapter import chat_messages as anthropic_turns
from server.dialects.anthropic.schemas import AnthropicMessagesRequest
from server.dialects.openai.adapter import responses_messages
from server.dialects.openai.requests import ResponsesRequest


def test_anthropic_blocks_become_turns_with_calls_and_results() -> None:
    body = AnthropicMessagesRequest.model_validate(
        {
            "max_tokens": 5,
            "system": [{"type": "text", "text": "Be exact."}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Checking."},
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "get_weather",
                            "input": {"city": "Oslo"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "-3 C"}],
                        }
                    ],
                },
            ],
        }
    )
    assert anthropic_turns(body.system, body.messages) == [
        ChatMessage("system", "Be exact."),
        ChatMessage("user", "Weather?"),
        ChatMessage(
            "assistant", "Checking.", tool_calls=(ToolCall("t1", "get_weather", {"city": "Oslo"}),)
        ),
        ChatMessage("tool", "-3 C", tool_call_id="t1"),
    ]


def test_responses_input_items_become_turns() -> None:
    body = ResponsesRequest.model_validate(
        {
            "instructions": "Be exact.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "get_weather",
                    "arguments": '{"city": "Oslo"}',
                },
                {"type": "function_call_output", "call_id": "c1", "output": "-3 C"},
            ],
        }
    )
    assert responses_messages(body) == [
        ChatMessage("system", "Be exact."),
        ChatMessage("user", "Weather?"),
        ChatMessage("assistant", tool_calls=(ToolCall("c1", "get_weather", {"city": "Oslo"}),)),
        ChatMessage("tool", "-3 C", tool_call_id="c1"),
    ]


def test_text_parts_are_joined_with_a_blank_line_as_llama_server_does() -> None:
    """OpenAI content parts and Anthropic text blocks stay apart ("What is" + "the best book"
    is not "What isthe best book"); llama.cpp's test_chat_template_assistant_prefill expects
    "Wh\\n\\nill" from the parts "Wh" and "ill". Parts of other kinds, and empty ones, add none."""
    body = AnthropicMessagesRequest.model_validate(
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Wh"},
                        {"type": "text", "text": ""},
                        {"type": "text", "text": "ill"},
                    ],
                }
            ],
        }
    )
    assert [turn.content for turn in anthropic_turns(body.system, body.messages)] == ["Wh\n\nill"]
