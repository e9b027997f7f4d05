"""JSON schemas → GBNF grammars whose strings are valid JSON strings.

Every schema-bound reply goes through here (OpenAI's `response_format`, the Responses API's
`text.format`, Ollama's `format`, KoboldAI's JSON-schema grammar, Anthropic's `output_config`,
grammar-bound tool calls). The grammar comes from llama-cpp-python's converter
(`llama_cpp.llama_grammar`), whose `char` rule, the characters of every JSON string, admits
anything but `"` and `\\`: raw line feeds, tabs and every other control character too. JSON
forbids those unescaped inside a string (RFC 8259, section 7), so a model that writes a poem's
line breaks as they are answers `{"text": "Roses are red,<LF>…"}`, which no JSON parser reads
(the OpenAI SDK's `parse()`: "control character found while parsing a string"). Worse, a raw
line break lets a small model slip out of the object into prose while still inside the string,
which then never closes before max_tokens.

llama.cpp's own converter (common/json-schema-to-grammar.cpp) refuses U+0000..U+001F and U+007F
in its `char` rule; the Python copy never got that fix. So the rule is replaced in the
converter's output, by its exact text: if a llama-cpp-python upgrade changes the rule, the
check below fails loudly (a 500 naming this module, and
tests/server/core/llama/test_json_grammar.py) instead of silently letting control characters
through again. The `dot` rule a schema's `pattern` uses for `.` (any character but CR and LF)
gets the same limits, plus `"` and `\\`, which a bare `.` would otherwise write unescaped
into the JSON string.
"""

from __future__ import annotations

import json
from typing import Any

from llama_cpp import llama_grammar

_HEX4 = "[0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]"
# The rules as llama-cpp-python 0.3.x writes them, and what each becomes.
LIBRARY_CHAR_RULE = rf'[^"\\] | "\\" (["\\/bfnrt] | "u" {_HEX4})'
LIBRARY_DOT_RULE = r"[^\x0A\x0D]"
# A JSON string's character (RFC 8259): anything but `"`, `\` and the control characters, or an
# escape. U+007F is allowed by JSON but refused here as llama.cpp refuses it: a DEL in an
# answer is never wanted.
JSON_CHAR_RULE = rf'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" {_HEX4})'
JSON_DOT_RULE = r'[^"\\\x7F\x00-\x1F]'
_REPLACED = {LIBRARY_CHAR_RULE: JSON_CHAR_RULE, LIBRARY_DOT_RULE: JSON_DOT_RULE}


class ConverterChangedError(RuntimeError):
    """The installed llama-cpp-python writes JSON strings differently than this module knows."""


def check_converter() -> None:
    """Raise unless llama-cpp-python's converter still writes the rules replaced here."""
    char = llama_grammar.PRIMITIVE_RULES["char"].content
    dot = llama_grammar.DOT
    if char != LIBRARY_CHAR_RULE or dot != LIBRARY_DOT_RULE:
        raise ConverterChangedError(
            "llama-cpp-python's JSON-schema converter changed its string rules "
            f"(char ::= {char}; dot ::= {dot}): update server/core/llama/sampling/json_grammar.py, "
            "which makes them refuse control characters"
        )


def json_schema_gbnf(schema: dict[str, Any]) -> str:
    """The GBNF grammar of `schema`, its strings valid JSON strings. The converter's errors
    (assorted, for schemas it does not support) pass through."""
    check_converter()
    grammar = str(llama_grammar.json_schema_to_gbnf(json.dumps(schema)))
    return "\n".join(_strict_line(line) for line in grammar.split("\n"))


def _strict_line(line: str) -> str:
    # One `name ::= body` a line; a rule is replaced wherever its whole body is the library's
    # (the name may carry a suffix: the converter renames a rule whose name a property took).
    name, separator, body = line.partition(" ::= ")
    replaced = _REPLACED.get(body) if separator else None
    return line if replaced is None else f"{name}{separator}{replaced}"
