"""The chat template settings of `HearthSettings`: which template, and the variables it gets.

KoboldCpp's keys (`jinjatemplate`, `jinja_kwargs`, `jinjathink`, `reasoningeffort`) and
llama-server's `chat_template`, with llama-server's flags beside KoboldCpp's
(server/settings/cli.py). Kept apart so the settings model stays readable; `HearthSettings`
inherits them, so they are ordinary settings everywhere (command line, .kcpps, launcher).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from server.settings.flags import flags

ReasoningEffort = Literal["default", "none", "minimal", "low", "medium", "high", "xhigh", "max"]

# KoboldCpp writes "default", "true" or "false"; llama-server's --reasoning says on, off or
# auto; people write the rest.
_THINK_WORDS = {
    "on": "true",
    "yes": "true",
    "1": "true",
    "enabled": "true",
    "off": "false",
    "no": "false",
    "0": "false",
    "disabled": "false",
    "auto": "default",
    "": "default",
}


class ChatTemplateFields(BaseModel):
    # KoboldCpp's Jinja Template (its Loaded Files tab) and llama-server's
    # --chat-template-file: this file's Jinja replaces the model's own template.
    jinjatemplate: str | None = Field(
        default=None,
        description="Jinja chat template file used instead of the model's own.",
        json_schema_extra=flags("--jinjatemplate", "--chat-template-file", metavar="FILE"),
    )
    # llama-server's --chat-template: one of its built-in names or the Jinja text itself. Not
    # a KoboldCpp key; a .kcpps file without it means none.
    chat_template: str | None = Field(
        default=None,
        description="Chat template used instead of the model's own: a built-in name (chatml, "
        "llama3, gemma, mistral-v7, …) or Jinja text.",
        json_schema_extra=flags("--chat-template", metavar="NAME|JINJA"),
    )
    # KoboldCpp's Jinja Kwargs (a JSON object as text, "" when unset) and llama-server's
    # --chat-template-kwargs.
    jinja_kwargs: str = Field(
        default="",
        description="Extra variables for the chat template, as a JSON object (e.g. "
        '{"enable_thinking": false}); a request\'s chat_template_kwargs win.',
        json_schema_extra=flags("--jinja_kwargs", "--chat-template-kwargs", metavar="JSON"),
    )
    # KoboldCpp's Jinja Thinking; llama-server's --reasoning on|off|auto says the same.
    jinjathink: Literal["default", "true", "false"] = Field(
        default="default",
        description="Tell the chat template to think (true) or not (false) through its "
        "enable_thinking variable; default: true, as llama-server says, unless a request or "
        "--chat-template-kwargs says otherwise.",
        json_schema_extra=flags(
            "--jinjathink", "--reasoning", "-rea", metavar="default|true|false"
        ),
    )
    # KoboldCpp's Think Effort and llama-server's --reasoning-effort (gpt-oss reads it).
    reasoningeffort: ReasoningEffort = Field(
        default="default",
        description="The chat template's reasoning_effort variable (low, medium, high, …); "
        "default: none given.",
        json_schema_extra=flags("--reasoningeffort", "--reasoning-effort", metavar="LEVEL"),
    )

    # (Named apart from HearthSettings' own validators: a subclass method of the same name
    # would replace this one.)
    @field_validator("jinjatemplate", "chat_template", mode="before")
    @classmethod
    def _blank_template_is_unset(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        # A path loses its surrounding blanks; Jinja text is kept as given (its whitespace
        # may be part of the prompt).
        return value if "{" in value else value.strip()

    @field_validator("jinja_kwargs", mode="before")
    @classmethod
    def _kwargs_object(cls, value: Any) -> Any:
        if value is None:  # KoboldCpp writes "" or null for none
            return ""
        if isinstance(value, dict):
            return json.dumps(value)
        if isinstance(value, str) and value.strip():
            json_object(value)  # a ValueError, which pydantic reports with the field's name
            return value.strip()
        return value

    @field_validator("jinjathink", mode="before")
    @classmethod
    def _think_words(cls, value: Any) -> Any:
        if value is None:
            return "default"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            word = value.strip().lower()
            return _THINK_WORDS.get(word, word)
        return value

    @field_validator("reasoningeffort", mode="before")
    @classmethod
    def _effort_word(cls, value: Any) -> Any:
        if value is None:
            return "default"
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def template_kwargs(self) -> dict[str, Any]:
        """What every chat template render receives besides the conversation: --jinja_kwargs,
        with --jinjathink's enable_thinking and --reasoningeffort's reasoning_effort over it
        (each when not "default"). A request's own chat_template_kwargs win over all."""
        kwargs = json_object(self.jinja_kwargs) if self.jinja_kwargs else {}
        if self.jinjathink != "default":
            kwargs["enable_thinking"] = self.jinjathink == "true"
        if self.reasoningeffort != "default":
            kwargs["reasoning_effort"] = self.reasoningeffort
        return kwargs


def json_object(text: str) -> dict[str, Any]:
    """`text` as a JSON object; ValueError saying why when it is not one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ValueError('must be a JSON object, such as {"enable_thinking": false}')
    return value
