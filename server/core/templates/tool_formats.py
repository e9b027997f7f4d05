"""The native tool-call formats Hearth parses while the model writes, and telling from a chat
template which one a model uses.

A model trained to call tools writes its calls in its own format, which its chat template shows
(the template renders earlier calls the same way, and often describes the format). Hearth reads
the template's text, as llama.cpp does (common/chat.cpp): a marker only one family uses names
the format. The parsers themselves live in `tool_formats_json.py` (Hermes, and reading JSON
calls), `tool_formats_llama3.py`, `tool_formats_mistral.py`, `tool_formats_xml.py` (Qwen3-Coder)
and `tool_formats_harmony.py` (gpt-oss), one made per reply by `tool_formats_live.py`; this
module stays free of them so that `chat.py` can ask for the format without importing any.
"""

from __future__ import annotations

import enum
import re


class ToolFormat(enum.Enum):
    # <tool_call>{"name": …, "arguments": {…}}</tool_call> (Hermes 2/3, Qwen 2.5/3, Granite 4…)
    HERMES = "hermes"
    # {"name": …, "parameters": {…}}, optionally after <|python_tag|>; `;` between calls
    LLAMA3 = "llama3"
    # [TOOL_CALLS][{"name": …, "arguments": {…}}, …] or [TOOL_CALLS]name[ARGS]{…} per call
    MISTRAL = "mistral"
    # <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
    QWEN3_CODER = "qwen3_coder"
    # gpt-oss: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
    HARMONY = "harmony"


# A JSON object whose first key is "name", as Hermes-style templates show a call (`{"name": "`
# in the template's own rendering, or `{\"name\": <function-name>` in its instructions).
_JSON_NAME = re.compile(r'\{\s*\\?"name\\?"')
# Templates that wrap something other than one JSON object in <tool_call> tags (GLM's and
# Ling's <arg_key>, MiniMax's <invoke name=, Qwen3-Coder's <function=, Apriel's <tool_calls>
# list): not Hermes.
_NOT_HERMES = ("<arg_key>", "<invoke name=", "<function=", "<tool_calls>")
# Llama 3.1-3.3 tell the model the call's shape in these words.
_LLAMA3_INSTRUCTION = 'Respond in the format {"name": function name, "parameters"'


def detect_tool_format(template_source: str | None) -> ToolFormat | None:
    """The format a chat template's model calls tools in, or None (unknown, or a template that
    takes no tools): calls are then made the KoboldCpp way (a JSON-schema-bound reply)."""
    source = template_source or ""
    if "tools" not in source:
        return None  # the template never receives tools: the model has no format of its own
    if "<|channel|>" in source:
        return ToolFormat.HARMONY
    if "[TOOL_CALLS]" in source:
        return ToolFormat.MISTRAL
    if "<tool_call>" in source and "<function=" in source and "<parameter=" in source:
        return ToolFormat.QWEN3_CODER
    if (
        "<tool_call>" in source
        and _JSON_NAME.search(source)
        and not any(marker in source for marker in _NOT_HERMES)
    ):
        return ToolFormat.HERMES
    # Functionary v3.1 also has <|python_tag|>, but writes <function=NAME>{…}</function>.
    if ("<|python_tag|>" in source or _LLAMA3_INSTRUCTION in source) and "<function=" not in source:
        return ToolFormat.LLAMA3
    return None


def format_tags(tool_format: ToolFormat | None) -> tuple[str, str] | None:
    """The tags around each call, for the formats that have them."""
    if tool_format in (ToolFormat.HERMES, ToolFormat.QWEN3_CODER):
        return ("<tool_call>", "</tool_call>")
    return None
