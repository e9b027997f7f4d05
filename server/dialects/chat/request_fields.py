"""Small readings of request fields every dialect shares: message text from content parts,
stop lists, the penalty window, tokens without BOS, and response ids.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import replace

from server.core.scheduling.engine import Tokenizer
from server.core.types import (
    SamplingParams,
)


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def text_of(content: str | Sequence[object] | None, kinds: Collection[str] = ("text",)) -> str:
    """A message's text: the string itself, or the text of its parts of `kinds` (OpenAI
    content parts, Anthropic blocks; a part without a type counts as text) with a blank line
    between parts, as llama-server joins them (so "What is" + "the book" stay two words)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = (
        getattr(part, "text", None) for part in content if getattr(part, "type", "text") in kinds
    )
    return "\n\n".join(text for text in texts if text)


def tokens_without_bos(tokenizer: Tokenizer, text: str, special: bool = True) -> list[int]:
    """`text`'s tokens without the BOS before them and EOS (or SEP) after, where added."""
    ids, added = tokenizer.tokenize(text, special=special), tokenizer.tokenize("", special=special)
    before = next(n for n in range(len(added), -1, -1) if ids[:n] == added[:n])  # BOS, usually
    end = len(ids) - (len(added) - before)  # what the vocabulary adds after: EOS or SEP
    return ids[before:end] if ids[end:] == added[before:] else ids[before:]


def with_penalty_window(sampling: SamplingParams, last_n: int | None) -> SamplingParams:
    """Apply a `repeat_last_n` as Ollama and llama-server mean it: 0 turns the penalties off,
    -1 covers the whole context (Hearth's 0), None keeps the default window."""
    if last_n == 0:
        return replace(sampling, rep_pen=1.0, presence_penalty=0.0, frequency_penalty=0.0)
    if last_n is not None:
        return replace(sampling, rep_pen_range=max(last_n, 0))
    return sampling


def stop_list(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,) if stop else ()
    return tuple(s for s in stop if s)
