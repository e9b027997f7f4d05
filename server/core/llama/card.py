"""ModelCard: what planning a request needs of a model (tokenizer, schema check, chat
template), apart from its engine, so the event loop can use it while the worker swaps models."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from server.core.llama.loading.model import Vocabulary
from server.core.llama.sampling.sampler import check_grammar, grammar_shape_problem, schema_grammar
from server.core.load_settings import ModelOptions, TemplateChoice
from server.core.scheduling.engine import EngineError
from server.core.templates.chat import ChatTemplate
from server.core.types import GenerationRequest


class ModelCard:
    """A model's tokenizer, schema check and chat template, for planning requests: the
    engine's own (over its LoadedModel), and with --modeldir one per listed model, loaded or
    not (a vocab-only load, never freed while the server runs, so the event loop can use it
    while the worker swaps engines)."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary

    @classmethod
    def load(
        cls,
        path: Path,
        context_size: int,
        slots: int,
        template: TemplateChoice | None = None,
        options: ModelOptions | None = None,
    ) -> ModelCard:
        """`template`: the chat template the user chose over the model's own, if any;
        `options`: what changes the vocabulary's answers (metadata overrides, --nobostoken)."""
        vocabulary = Vocabulary.load_vocab_only(path, template, options)
        vocabulary.slot_context = context_size // max(1, slots)  # as a loaded context's slot
        return cls(vocabulary)

    @property
    def chat_template(self) -> ChatTemplate:
        return self.vocabulary.chat_template

    @functools.cached_property
    def end_tokens(self) -> tuple[int, ...]:
        """The model's end-of-generation tokens (llama.cpp's EOG set), listed on first use:
        what llama-server reports as `ignore_eos`'s logit biases."""
        vocabulary = self.vocabulary
        return tuple(t for t in range(vocabulary.n_vocab) if vocabulary.is_end(t))

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        vocabulary = self.vocabulary
        return vocabulary.tokenize(text, add_bos=vocabulary.add_bos, parse_special=special)

    def detokenize(self, ids: list[int], special: bool = True) -> str:
        return self.vocabulary.detokenize(ids, special)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return len(self.vocabulary.fit_to_context(request)[1])

    def check_json_schema(self, schema: dict[str, Any]) -> None:
        """ValueError unless llama.cpp accepts the grammar made from `schema`."""
        try:
            grammar = schema_grammar(schema)
        except EngineError as exc:
            raise ValueError(str(exc)) from None
        if grammar is None or not check_grammar(self.vocabulary.vocab, grammar):
            raise ValueError("llama.cpp rejected the grammar made from this JSON schema")

    def check_grammar(self, grammar: str) -> None:
        """ValueError unless llama.cpp parses `grammar` (GBNF with a `root` rule)."""
        problem = grammar_shape_problem(grammar)
        if problem is not None:
            raise ValueError(f"this grammar is refused: {problem}")
        if not check_grammar(self.vocabulary.vocab, grammar):
            raise ValueError("llama.cpp could not parse this GBNF grammar (it needs a root rule)")

    def close(self) -> None:
        self.vocabulary.free_vocabulary()
