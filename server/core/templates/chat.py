"""Chat conversations as the core sees them, and turning them into one prompt string.

Every chat dialect (OpenAI chat and Responses, Anthropic Messages, Ollama chat) converts its
messages into these dataclasses; `ChatTemplate` renders them. The template the user chose
(--chat-template-file, --chat-template) is used when there is one, else the model's own Jinja
template (GGUF `tokenizer.chat_template`) when the file has one; otherwise a built-in turn
format for the model's architecture. The bundled Gemma 3 270M has none, so it gets Gemma's.
Jinja templates receive the server's template variables (--chat-template-kwargs, --jinjathink,
--reasoningeffort) and a request's own (`with_kwargs`); server/core/templates/template_jinja.py
compiles and renders them.

Tool calls without a model-specific format work the KoboldCpp way: the tools are described in
the system text, and the reply is constrained by a JSON schema to one valid call
(`{"name": ..., "arguments": {...}}`), read back while it streams by
server/core/tool_calls/tool_formats_bound.py. What a template does not show of such calls and their
results is written in for it (server/core/templates/template_polyfills.py).
"""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2

# ChatTemplateError lives with the Jinja it is mostly about; it is imported from here too.
from server.core.templates.template_jinja import ChatTemplateError as ChatTemplateError
from server.core.templates.template_jinja import (
    compile_template,
    default_variables,
    render_template,
)
from server.core.templates.template_polyfills import (
    TemplateShows,
    needs_polyfill,
    polyfilled,
    probe_template,
)
from server.core.templates.tool_formats import ToolFormat, detect_tool_format, format_tags
from server.core.types import MediaInput


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
    # An assistant turn's thought, given back by the client (OpenAI's reasoning_content,
    # Anthropic's thinking blocks, Ollama's thinking): templates that take it show it.
    reasoning: str = ""
    # The turn's images and sounds, in the order their MEDIA_MARKER stands in `content`
    # (server/core/types.py): a request's media are its messages' in turn.
    media: tuple[MediaInput, ...] = ()


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


TOOL_DECISION_QUESTION = (
    "Before answering: does the last request need one of the tools listed above? "
    "Reply with yes or no only."
)


class ChatTemplate:
    """Renders conversations for one model: a Jinja template (the user's choice or the model's
    own) or a built-in turn format. `origin` says where the Jinja came from (the console and
    /props say it); `kwargs` are the variables every render receives. A template that does not
    compile raises ChatTemplateError here."""

    def __init__(
        self,
        jinja_source: str | None,
        architecture: str,
        bos_token: str = "",
        eos_token: str = "",
        *,
        origin: str = "the model's own",
        kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self._bos = bos_token
        self._eos = eos_token
        self._builtin = _builtin_format(architecture)
        self._jinja: jinja2.Template | None = None
        self._source = jinja_source or None
        self._origin = origin
        self._kwargs: dict[str, Any] = dict(kwargs or {})
        # The model's own tool-call format, parsed live (server/core/templates/tool_formats.py).
        self._tool_format = detect_tool_format(jinja_source)
        # Probed when first needed, once for this template and every copy `with_kwargs` makes
        # of it (one a request): a list the copies share.
        self._template_shows: list[TemplateShows] = []
        if jinja_source:
            self._jinja = compile_template(jinja_source)

    @property
    def uses_model_template(self) -> bool:
        """Whether a Jinja template renders (the model's own or the user's), not a built-in
        turn format."""
        return self._jinja is not None

    @property
    def source(self) -> str | None:
        """The Jinja text in use (None: a built-in turn format)."""
        return self._source

    @property
    def origin(self) -> str:
        """Where the template in use came from, in words: "the model's own", "the file X",
        "the built-in chatml", or Hearth's built-in turn format when there is no Jinja."""
        if self._jinja is None:
            return f"Hearth's built-in {self._builtin.name} turn format"
        return self._origin

    @property
    def kwargs(self) -> dict[str, Any]:
        """The variables every render receives besides the conversation."""
        return dict(self._kwargs)

    def with_kwargs(self, extra: Mapping[str, Any] | None) -> ChatTemplate:
        """This template with `extra` variables over its own (a request's
        chat_template_kwargs win over the server's); the compiled Jinja is shared."""
        if not extra:
            return self
        bound = copy.copy(self)
        bound._kwargs = {**self._kwargs, **extra}
        return bound

    @property
    def tool_format(self) -> ToolFormat | None:
        """The template's own tool-call format when Hearth can parse it live, else None (the
        template takes no tools, or writes calls in a format Hearth does not know)."""
        return self._tool_format

    @property
    def tool_call_tags(self) -> tuple[str, str] | None:
        """The tags around each call of the model's own format, for formats that have them."""
        return format_tags(self._tool_format)

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
        messages = [_jinja_message(m) for m in turns]
        if needs_polyfill(messages):
            messages = polyfilled(messages, self._shows())
        prompt = self._render(messages, end is PromptEnd.REPLY, extra)
        if end is PromptEnd.CONTINUE:
            # A template has no "leave the last turn open" switch: render it closed and cut
            # after its text (vLLM's and llama.cpp's way), which must appear there verbatim.
            text = turns[-1].content
            at = prompt.rfind(text) if text else -1
            if at < 0:
                raise ChatTemplateError(
                    f"the chat template ({self._origin}) does not show the final assistant "
                    "message as sent, so it cannot be continued"
                )
            prompt = prompt[: at + len(text)]
        stops = (self._eos,) if self._eos else ()
        return RenderedChat(prompt, stops)

    def _render(
        self, messages: list[dict[str, Any]], generation_prompt: bool, extra: dict[str, Any]
    ) -> str:
        assert self._jinja is not None
        # llama.cpp's defaults, then the template's variables: the conversation's names win.
        context = {
            **default_variables(extra.get("tools", [])),
            **self._kwargs,
            "messages": messages,
            "add_generation_prompt": generation_prompt,
            "bos_token": self._bos,
            "eos_token": self._eos,
            **extra,
        }
        return render_template(self._jinja, self._origin, context)

    def _shows(self) -> TemplateShows:
        """What the template shows of tool calls and results, probed once (a race only
        probes twice)."""
        if not self._template_shows:
            shows = probe_template(lambda turns: self._render(turns, False, {}))
            self._template_shows.append(shows)
        return self._template_shows[0]


@dataclass(frozen=True, slots=True)
class _TurnFormat:
    """A plain turn format: `start + role + newline + text + end` per message."""

    name: str
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
    name="gemma",
    turn_start="<start_of_turn>",
    turn_end="<end_of_turn>",
    role_names={"user": "user", "assistant": "model", "tool": "user", "system": "user"},
    system_as_user_prefix=True,
)
_CHATML = _TurnFormat(
    name="chatml",
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
    if message.reasoning:
        # llama-server's name for it; gpt-oss's template reads `thinking` (llama.cpp copies
        # it there too).
        data["reasoning_content"] = data["thinking"] = message.reasoning
    return data
