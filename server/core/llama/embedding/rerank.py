"""Reranking prompts, as llama-server builds them for /rerank (its `format_prompt_rerank`,
tools/server/server-common.cpp in the llama-cpp-python 0.3.36 sdist), and whether a model has
the head that makes its rank-pooled output a relevance score.

One prompt per document. A model whose GGUF has a rerank template
(`tokenizer.chat_template.rerank`, e.g. Qwen3-Reranker) gets it with {query} and {document}
filled in, read with its special tokens. Any other gets the BERT cross-encoder pair:
[BOS] query [EOS] [SEP] document [EOS], each special token only where the vocabulary adds
one (EOS standing in for SEP's end marker when there is none: SEP itself).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

import llama_cpp as llama

from server.models.gguf import GGUFFormatError, gguf_summary

logger = logging.getLogger(__name__)

# The tensors llama.cpp's rank pooling applies when a GGUF has them (a BERT classifier's
# `cls`, a Qwen3 or ModernBERT reranker's `cls.output`): without either, the "score" is the
# first value of the pooled hidden state, as llama-server then answers too.
_HEAD_TENSORS = frozenset({"cls.weight", "cls.output.weight"})


class _Vocabulary(Protocol):
    model: Any
    vocab: Any
    add_bos: bool
    bos: int

    def tokenize(self, text: str, *, add_bos: bool, parse_special: bool) -> list[int]: ...


def rerank_template(model: Any) -> str | None:
    """The model's own rerank prompt with {query} and {document}, if its GGUF has one."""
    template = llama.llama_model_chat_template(model, b"rerank")
    return template.decode("utf-8", errors="replace") if template else None


def rerank_tokens(vocabulary: _Vocabulary, query: str, document: str) -> list[int]:
    """The prompt that scores `document` against `query`."""
    template = rerank_template(vocabulary.model)
    if template is not None:
        text = template.replace("{query}", query).replace("{document}", document)
        return vocabulary.tokenize(text, add_bos=False, parse_special=True)
    vocab = vocabulary.vocab
    end = int(llama.llama_vocab_eos(vocab))
    separator = int(llama.llama_vocab_sep(vocab))
    if end == llama.LLAMA_TOKEN_NULL:
        end = separator
    adds_end = bool(llama.llama_vocab_get_add_eos(vocab))
    tokens = [vocabulary.bos] if vocabulary.add_bos else []
    tokens += vocabulary.tokenize(query, add_bos=False, parse_special=False)
    tokens += [end] if adds_end else []
    tokens += [separator] if llama.llama_vocab_get_add_sep(vocab) else []
    tokens += vocabulary.tokenize(document, add_bos=False, parse_special=False)
    tokens += [end] if adds_end else []
    return tokens


def has_rank_head(path: Path) -> bool:
    """Whether the GGUF at `path` has a classification head for rank pooling."""
    try:
        tensors = gguf_summary(path).tensors
    except (OSError, GGUFFormatError):
        return False
    found = any(tensor.name in _HEAD_TENSORS for tensor in tensors)
    if not found:
        logger.warning(
            "%s has no rank head (cls or cls.output tensors): its rerank scores are the first "
            "value of a hidden state, not relevance scores; use a reranker model",
            path.name,
        )
    return found
