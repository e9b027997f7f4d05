"""Chat conversations as the core sees them, and turning them into one prompt string.

Every chat dialect (OpenAI chat and Responses, Anthropic Messages, Ollama chat) converts its
messages into these dataclasses; `ChatTemplate` renders them. The model's own Jinja template
(GGUF `tokenizer.chat_template`) is used when the file has one; otherwise a built-in template
for the model's architecture. The bundled Gemma 3 270M has none, so it gets Gemma's turn format.

Tool calls without a model-specific format work the KoboldCpp way: the tools are described in
the system text, and the reply is constrained by a JSON schema to one valid call
(`{"name": ..., "arguments": {...}}`), which `parse_tool_call` reads back.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import jinja2
import jinja2.sandbox


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function the model may call; `parameters` is its JSON schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One turn. `role` is system, user, assistant or tool (developer maps to system)."""

    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # the tool's name on a tool result


class ChatTemplateError(ValueError):
    """The conversation cannot be rendered (bad roles, or the model's template refused it)."""


class PromptEnd(enum.Enum):
    """Where the rendered prompt ends."""

    REPLY = "reply"  # a new assistant turn begins: the model writes the reply (the default)
    CONTINUE = "continue"  # inside the final assistant message: the model carries it on
    # (assistant prefill: Anthropic's rule, llama-server's `continue_final_message`)
    NONE = "none"  # after the last message's turn (llama-server's add_generation_prompt false)


@dataclass(frozen=True, slots=True)
class RenderedChat:
    prompt: str
    stop: tuple[str, ...]  # end-of-turn markers: generation must stop there


# Tool-call formats Hearth parses live (Hermes / Qwen style): the JSON object between the tags.
_KNOWN_TOOL_CALL_TAGS = (("<tool_call>", "</tool_call>"),)

TOOL_DECISION_QUESTION = (
    "Before answering: does the last request need one of the tools listed above? "
    "Reply with yes or no only."
)


class ChatTemplate:
    """Renders conversations for one model: its own Jinja template or a built-in one."""

    def __init__(
        self,
        jinja_source: str | None,
        architecture: str,
        bos_token: str = "",
        eos_token: str = "",
    ) -> None:
        self._bos = bos_token
        self._eos = eos_token
        self._builtin = _builtin_format(architecture)
        self._jinja: jinja2.Template | None = None
        self._tool_tags = next(
            (tags for tags in _KNOWN_TOOL_CALL_TAGS if jinja_source and tags[0] in jinja_source),
            None,
        )
        if jinja_source:
            environment = jinja2.sandbox.ImmutableSandboxedEnvironment(
                trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader()
            )
            environment.globals["raise_exception"] = _raise_template_error
            environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
            environment.filters["tojson"] = _tojson
            self._jinja = environment.from_string(jinja_source)

    @property
    def uses_model_template(self) -> bool:
        return self._jinja is not None

    @property
    def tool_call_tags(self) -> tuple[str, str] | None:
        """The model's own tool-call tags when Hearth can parse them live, else None."""
        return self._tool_tags

    def render(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        extra_user_turn: str | None = None,
        native_tools: bool = False,
        end: PromptEnd = PromptEnd.REPLY,
    ) -> RenderedChat:
        """The prompt ending where the assistant's reply begins (or as `end` says).

        With `tools`, the system text lists them and says how to call one, or, with
        `native_tools`, the model's own template receives them (its own tool format).
        `extra_user_turn` appends a question (used to ask the model whether it needs a tool).
        `PromptEnd.CONTINUE` needs a final assistant message without tool calls.
        """
        if not messages and extra_user_turn is None:
            raise ChatTemplateError("messages must not be empty")
        turns = list(messages)
        final = turns[-1] if turns else None
        if (
            end is PromptEnd.CONTINUE
            and final is not None
            and final.role == "assistant"
            and not (final.content or final.tool_calls)
        ):
            turns, end = turns[:-1], PromptEnd.REPLY  # nothing to carry on: a reply begins
        if end is PromptEnd.CONTINUE:
            final = turns[-1]
            if final.role != "assistant" or extra_user_turn is not None:
                raise ChatTemplateError("only a final assistant message can be continued")
            if final.tool_calls:
                raise ChatTemplateError(
                    "Cannot continue an assistant message that contains tool calls."
                )
        native = native_tools and self._jinja is not None
        if tools and not native:
            turns = _with_tool_instructions(turns, tools)
        if extra_user_turn is not None:
            turns.append(ChatMessage("user", extra_user_turn))
        if self._jinja is not None:
            return self._render_jinja(turns, tools if native else (), end)
        return self._builtin.render(turns, self._bos, end)

    def _render_jinja(
        self, turns: list[ChatMessage], tools: Sequence[ToolSpec], end: PromptEnd
    ) -> RenderedChat:
        assert self._jinja is not None
        extra: dict[str, Any] = {}
        if tools:
            extra["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        try:
            prompt = self._jinja.render(
                messages=[_jinja_message(m) for m in turns],
                add_generation_prompt=end is PromptEnd.REPLY,
                bos_token=self._bos,
                eos_token=self._eos,
                **extra,
            )
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"the model's chat template failed: {exc}") from None
        if end is PromptEnd.CONTINUE:
            # A template has no "leave the last turn open" switch: render it closed and cut
            # after its text (vLLM's and llama.cpp's way), which must appear there verbatim.
            text = turns[-1].content
            at = prompt.rfind(text) if text else -1
            if at < 0:
                raise ChatTemplateError(
                    "the model's chat template does not show the final assistant message "
                    "as sent, so it cannot be continued"
                )
            prompt = prompt[: at + len(text)]
        stops = (self._eos,) if self._eos else ()
        return RenderedChat(prompt, stops)


@dataclass(frozen=True, slots=True)
class _TurnFormat:
    """A plain turn format: `start + role + newline + text + end` per message."""

    turn_start: str
    turn_end: str
    role_names: dict[str, str]
    system_as_user_prefix: bool  # Gemma has no system role: it goes in front of the first user

    def render(self, turns: list[ChatMessage], bos: str, end: PromptEnd) -> RenderedChat:
        parts = [bos]
        pending_system = ""
        last = len(turns) - 1
        for index, message in enumerate(turns):
            role = _canonical_role(message.role)
            text = _message_text(message)
            if role == "system" and self.system_as_user_prefix:
                pending_system += text + "\n\n"
                continue
            if pending_system and role != "user":  # Gemma: the system text as its own turn
                parts.append(self._user_turn(pending_system.rstrip()))
                pending_system = ""
            if role == "user" and pending_system:
                text, pending_system = pending_system + text, ""
            open_turn = end is PromptEnd.CONTINUE and index == last
            closing = "" if open_turn else f"{self.turn_end}\n"
            parts.append(f"{self.turn_start}{self.role_names[role]}\n{text}{closing}")
        if pending_system:
            parts.append(self._user_turn(pending_system.rstrip()))
        if end is PromptEnd.REPLY:
            parts.append(f"{self.turn_start}{self.role_names['assistant']}\n")
        return RenderedChat("".join(parts), (self.turn_end,))

    def _user_turn(self, text: str) -> str:
        return f"{self.turn_start}{self.role_names['user']}\n{text}{self.turn_end}\n"


_GEMMA = _TurnFormat(
    turn_start="<start_of_turn>",
    turn_end="<end_of_turn>",
    role_names={"user": "user", "assistant": "model", "tool": "user", "system": "user"},
    system_as_user_prefix=True,
)
_CHATML = _TurnFormat(
    turn_start="<|im_start|>",
    turn_end="<|im_end|>",
    role_names={"user": "user", "assistant": "assistant", "tool": "tool", "system": "system"},
    system_as_user_prefix=False,
)


def _builtin_format(architecture: str) -> _TurnFormat:
    return _GEMMA if architecture.startswith("gemma") else _CHATML


def _canonical_role(role: str) -> str:
    role = "system" if role == "developer" else role
    if role not in ("system", "user", "assistant", "tool"):
        raise ChatTemplateError(f"unknown message role {role!r}")
    return role


def _message_text(message: ChatMessage) -> str:
    """What a turn says, including tool calls it made and tool results it carries."""
    text = message.content
    if message.role == "tool":
        label = message.name or message.tool_call_id or "tool"
        text = f"Result of {label}: {text}"
    for call in message.tool_calls:
        text += ("\n" if text else "") + json.dumps(
            {"name": call.name, "arguments": call.arguments}
        )
    return text


def _with_tool_instructions(
    turns: list[ChatMessage], tools: Sequence[ToolSpec]
) -> list[ChatMessage]:
    listing = "\n".join(
        json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters})
        for t in tools
    )
    instructions = (
        "You can call these tools:\n" + listing + "\n"
        'To call one, reply with only a JSON object: {"name": <tool name>, "arguments": {...}}.'
    )
    if turns and _canonical_role(turns[0].role) == "system":
        first = turns[0]
        return [ChatMessage("system", first.content + "\n\n" + instructions), *turns[1:]]
    return [ChatMessage("system", instructions), *turns]


def _jinja_message(message: ChatMessage) -> dict[str, Any]:
    data: dict[str, Any] = {"role": _canonical_role(message.role), "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id:
        data["tool_call_id"] = message.tool_call_id
    if message.name:
        data["name"] = message.name
    return data


def _raise_template_error(message: str) -> None:
    raise ChatTemplateError(message)


def _tojson(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


def tool_call_schema(tools: Sequence[ToolSpec], only: str | None = None) -> dict[str, Any]:
    """JSON schema admitting exactly one call of one of `tools` (or of the tool `only`)."""
    chosen = [t for t in tools if only is None or t.name == only]
    if not chosen:
        raise ChatTemplateError(f"tool_choice names {only!r}, which is not among the tools")
    return {
        "oneOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": _object_schema(t)},
                "required": ["name", "arguments"],
            }
            for t in chosen
        ]
    }


def _object_schema(tool: ToolSpec) -> dict[str, Any]:
    schema = dict(tool.parameters) if tool.parameters else {"type": "object"}
    schema.setdefault("type", "object")
    return schema


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_tool_call(text: str, call_id: str) -> ToolCall:
    """Read the constrained reply back into a ToolCall; raises ValueError if it is not one."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise ValueError("the reply holds no JSON object")
    data = json.loads(match.group(0))
    name, arguments = data.get("name"), data.get("arguments", {})
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise ValueError("the reply is not a tool call")
    return ToolCall(call_id, name, arguments)
