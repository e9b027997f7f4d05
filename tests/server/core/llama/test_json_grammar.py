"""Schema-bound replies are JSON a parser reads: the grammar made from a JSON schema refuses
raw control characters inside strings (JSON allows them only escaped), and admits every escape
and every other character (server/core/llama/sampling/json_grammar.py).

The first tests read the grammar's text; the last run llama.cpp's own grammar engine over the
instruct model's vocabulary (loaded alone, without weights), token by token."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp as llama
import pytest
from llama_cpp import llama_grammar

from server.core.llama.sampling import json_grammar
from server.core.llama.sampling.sampler import schema_grammar
from server.core.scheduling.engine import EngineError

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
# A schema for each way the converter writes a string: a plain string property, a free object
# (keys and values), a string with a length, a `pattern` (whose `.` is the `dot` rule), an array.
SCHEMAS: dict[str, dict[str, Any]] = {
    "text": TEXT,
    "free object": {"type": "object"},
    "anything": {},
    "length": {"type": "string", "minLength": 2, "maxLength": 20},
    "pattern": {"type": "string", "pattern": "^a.+z$"},
    "array": {"type": "array", "items": {"type": "string"}},
    "extra keys": {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
    },
}
CONTROLS = [chr(code) for code in range(0x20)] + ["\x7f"]


def char_classes(grammar: str) -> Iterator[tuple[bool, str]]:
    """Every `[...]` of `grammar` outside its string literals: (negated, its content)."""
    index = 0
    while index < len(grammar):
        char = grammar[index]
        if char in '"[':
            closing = '"' if char == '"' else "]"
            end = index + 1
            while grammar[end] != closing:
                end += 2 if grammar[end] == "\\" else 1
            if char == "[":
                body = grammar[index + 1 : end]
                yield body.startswith("^"), body.removeprefix("^")
            index = end
        index += 1


def class_members(body: str) -> list[tuple[str, str]]:
    """A character class's content as (first, last) ranges, GBNF's escapes read."""

    def one(at: int) -> tuple[str, int]:
        if body[at] != "\\":
            return body[at], at + 1
        kind = body[at + 1]
        sizes = {"x": 2, "u": 4, "U": 8}
        if kind in sizes:
            return chr(int(body[at + 2 : at + 2 + sizes[kind]], 16)), at + 2 + sizes[kind]
        return {"n": "\n", "r": "\r", "t": "\t"}.get(kind, kind), at + 2

    ranges, at = [], 0
    while at < len(body):
        first, at = one(at)
        last = first
        if at + 1 < len(body) and body[at] == "-":
            last, at = one(at + 1)
        ranges.append((first, last))
    return ranges


def excluded(body: str, char: str) -> bool:
    return any(first <= char <= last for first, last in class_members(body))


@pytest.mark.parametrize("name", SCHEMAS)
def test_no_character_a_string_may_hold_is_a_control_character(name: str) -> None:
    """Every "any character but …" class in the grammar leaves out the control characters,
    and `"` and `\\`, which may only stand in a JSON string escaped."""
    grammar = schema_grammar(SCHEMAS[name])
    assert grammar is not None
    negated = [body for is_negated, body in char_classes(grammar) if is_negated]
    assert negated, grammar
    for body in negated:
        refused = [c for c in [*CONTROLS, '"', "\\"] if not excluded(body, c)]
        assert refused == [], f"[^{body}] admits {refused!r} in {name}'s grammar"


def test_the_installed_converter_writes_the_rules_that_are_replaced() -> None:
    """Fails when a llama-cpp-python upgrade changes its string rules: json_grammar.py must
    then be updated (its replacement would otherwise no longer apply)."""
    assert llama_grammar.PRIMITIVE_RULES["char"].content == json_grammar.LIBRARY_CHAR_RULE
    assert llama_grammar.DOT == json_grammar.LIBRARY_DOT_RULE
    json_grammar.check_converter()
    grammar = schema_grammar(TEXT)
    assert grammar is not None
    assert f"char ::= {json_grammar.JSON_CHAR_RULE}" in grammar.split("\n")


def test_a_changed_converter_fails_loudly_and_not_as_the_schemas_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    changed = llama_grammar.BuiltinRule(r'[^"] | "\\" ["\\]', [])
    monkeypatch.setitem(llama_grammar.PRIMITIVE_RULES, "char", changed)
    with pytest.raises(json_grammar.ConverterChangedError, match=r"json_grammar\.py"):
        schema_grammar(TEXT)


def test_a_schema_the_converter_cannot_read_is_still_the_schemas_fault() -> None:
    with pytest.raises(EngineError, match="cannot turn this JSON schema"):
        schema_grammar({"type": "no-such-type"})


# -- llama.cpp's own grammar engine ---------------------------------------------------------


class Vocabulary:
    """A GGUF's vocabulary alone, and llama.cpp's grammar sampler run over a text's tokens."""

    def __init__(self, path: Path) -> None:
        llama.llama_backend_init()
        params = llama.llama_model_default_params()
        params.vocab_only = True
        self.model = llama.llama_model_load_from_file(str(path).encode(), params)
        assert self.model
        self.vocab = llama.llama_model_get_vocab(self.model)
        # The token of each single byte (llama_tokenize reads text as a C string: no NUL).
        self.byte_tokens: dict[bytes, int] = {}
        piece = ctypes.create_string_buffer(8)
        for token in range(llama.llama_vocab_n_tokens(self.vocab)):
            size = llama.llama_token_to_piece(self.vocab, token, piece, len(piece), 0, False)
            if size == 1:
                self.byte_tokens.setdefault(piece.raw[:1], token)

    def tokens(self, text: str) -> list[int]:
        data = text.encode()
        if len(data) == 1 and data in self.byte_tokens:
            return [self.byte_tokens[data]]
        ids = (llama.llama_token * (len(data) + 8))()
        count = llama.llama_tokenize(self.vocab, data, len(data), ids, len(ids), False, False)
        assert count > 0
        return list(ids[:count])

    def accepts(self, grammar: str, text: str) -> bool:
        """Whether the grammar lets a model write `text`, a character at a time, and then
        end (the end-of-generation token is allowed only once the grammar is complete)."""
        sampler = llama.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        assert sampler
        try:
            for char in text:
                for token in self.tokens(char):
                    if not self._allowed(sampler, token):
                        return False
                    llama.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, llama.llama_vocab_eos(self.vocab))
        finally:
            llama.llama_sampler_free(sampler)

    @staticmethod
    def _allowed(sampler: Any, token: int) -> bool:
        data = (llama.llama_token_data * 1)(llama.llama_token_data(token, 0.0, 0.0))
        array = llama.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
        llama.llama_sampler_apply(sampler, ctypes.byref(array))
        return not math.isinf(data[0].logit)

    def close(self) -> None:
        llama.llama_model_free(self.model)


@pytest.fixture(scope="module")
def instruct_vocabulary(smollm2: Path) -> Iterator[Vocabulary]:
    loaded = Vocabulary(smollm2)
    yield loaded
    loaded.close()


def bound(schema: dict[str, Any]) -> str:
    grammar = schema_grammar(schema)
    assert grammar is not None
    return grammar


@pytest.mark.model
def test_llama_cpp_refuses_every_raw_control_character_inside_a_string(
    instruct_vocabulary: Vocabulary,
) -> None:
    grammar = bound(TEXT)
    assert instruct_vocabulary.accepts(grammar, '{"text": "Roses are red"}')
    # Those the model can write at all: SmolLM2's vocabulary has no token for a few of them.
    writable = [c for c in CONTROLS if c.encode() in instruct_vocabulary.byte_tokens]
    assert {"\x00", "\t", "\n", "\r", "\x1f", "\x7f"} <= set(writable)
    admitted = [c for c in writable if instruct_vocabulary.accepts(grammar, f'{{"text": "a{c}b"}}')]
    assert admitted == []


@pytest.mark.model
@pytest.mark.parametrize(
    "value",
    [
        r"Roses are red,\nviolets are blue",
        r"a tab\there, a return\r, a feed\f, a backspace\b",
        r"quotes \"inside\", a backslash \\ and a slash \/ or /",
        r"\u0000 \u001f \u00e9 \uD83D\uDE00",
        "non-ASCII: é ü ß 漢字 🙂 Ω",
        "",
    ],
)
def test_llama_cpp_admits_every_escape_and_every_printable_character(
    instruct_vocabulary: Vocabulary, value: str
) -> None:
    assert instruct_vocabulary.accepts(bound(TEXT), f'{{"text": "{value}"}}')


@pytest.mark.model
def test_keys_values_and_patterns_follow_the_same_rule(instruct_vocabulary: Vocabulary) -> None:
    free = bound({"type": "object"})
    assert instruct_vocabulary.accepts(free, r'{"a\nb": "c\td", "list": ["x\\y"]}')
    assert not instruct_vocabulary.accepts(free, '{"a\nb": "c"}')
    assert not instruct_vocabulary.accepts(free, '{"a": ["c\td"]}')
    pattern = bound({"type": "string", "pattern": "^a.+z$"})
    assert instruct_vocabulary.accepts(pattern, '"a-é-z"')
    assert not instruct_vocabulary.accepts(pattern, '"a\nz"')
    assert not instruct_vocabulary.accepts(pattern, '"a"z"')  # a bare `.` writes no unescaped quote
