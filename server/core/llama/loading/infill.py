"""Fill-in-the-middle prompts, as llama-server builds them for /infill (its
`format_prompt_infill`, tools/server/server-common.cpp in the llama-cpp-python 0.3.36 sdist).

The repository-level pattern of Qwen2.5-Coder (arXiv 2409.12186), with each special token the
model's own (llama.cpp's `llama_vocab_fim_*`, found by name or named in the GGUF):

    [FIM_REP]myproject\\n [FIM_SEP]file0\\n text0 ... [FIM_SEP]filename\\n
    [BOS] [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID]

A model without the repository and file tokens gets each extra file after a plain
"--- snippet ---" line instead. With `spm` (llama-server's --spm-infill) the suffix comes
before the prefix. What does not fit is cut as llama-server cuts it: the prefix keeps its end,
within three quarters of a batch; the suffix its start, within the rest of the batch; the
extra files the end of their text, within what the context has beyond a batch and twice the
tokens to generate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import llama_cpp as llama

from server.core.types import InfillParts

# llama-server's fixed names: the project and the file being edited are not asked for.
_PROJECT = "myproject\n"
_CURRENT_FILE = "filename\n"
_SNIPPET_SEPARATOR = "\n\n--- snippet ---\n\n"


class _Vocabulary(Protocol):
    vocab: Any
    n_vocab: int
    add_bos: bool
    bos: int

    def tokenize(self, text: str, *, add_bos: bool, parse_special: bool) -> list[int]: ...


@dataclass(frozen=True, slots=True)
class FimTokens:
    """The model's fill-in-the-middle tokens (None: it has none for that role)."""

    prefix: int | None
    suffix: int | None
    middle: int | None
    repository: int | None
    file_separator: int | None

    @classmethod
    def of(cls, vocab: Any) -> FimTokens:
        def token(read: Any) -> int | None:
            value = int(read(vocab))
            return None if value == llama.LLAMA_TOKEN_NULL else value

        return cls(
            token(llama.llama_vocab_fim_pre),
            token(llama.llama_vocab_fim_suf),
            token(llama.llama_vocab_fim_mid),
            token(llama.llama_vocab_fim_rep),
            token(llama.llama_vocab_fim_sep),
        )

    def missing(self) -> list[str]:
        """The roles /infill needs that the model has no token for (llama-server's words)."""
        needed = {"prefix": self.prefix, "suffix": self.suffix, "middle": self.middle}
        return [role for role, token in needed.items() if token is None]


@dataclass(frozen=True, slots=True)
class InfillRoom:
    """What bounds the prompt: a batch's tokens, the slot's context and the tokens the
    request may generate."""

    batch: int
    context: int
    generate: int


def infill_tokens(
    vocabulary: _Vocabulary, parts: InfillParts, room: InfillRoom, *, spm: bool = False
) -> list[int]:
    """The prompt's token ids. The model must have the prefix, suffix and middle tokens
    (`FimTokens.missing()` is empty); ValueError for a token id the model does not have."""
    fim = FimTokens.of(vocabulary.vocab)
    if fim.prefix is None or fim.suffix is None or fim.middle is None:
        raise ValueError(f"the model has no FIM token for: {', '.join(fim.missing())}")

    def plain(text: str) -> list[int]:
        return vocabulary.tokenize(text, add_bos=False, parse_special=False)

    prefix = _mixed(vocabulary, parts.prefix)
    suffix = _mixed(vocabulary, parts.suffix)
    typed = vocabulary.tokenize(parts.prompt, add_bos=False, parse_special=True)
    extra = _extra_tokens(fim, parts.extra, plain)
    prefix_take = min(len(prefix), 3 * (room.batch // 4))
    suffix_take = min(len(suffix), max(0, room.batch // 4 - (2 + len(typed))))
    extra_take = min(max(0, room.context - room.batch - 2 * room.generate), len(extra))
    before = [fim.prefix, *prefix[len(prefix) - prefix_take :], *typed]
    after = [fim.suffix, *suffix[:suffix_take]]
    if spm:
        before, after = after, before
    if vocabulary.add_bos:
        before.insert(0, vocabulary.bos)
    # llama-server puts the other files ahead of everything, BOS included.
    kept_extra = extra[len(extra) - extra_take :]
    return [*kept_extra, *before, *after, fim.middle]


def _extra_tokens(fim: FimTokens, files: Sequence[tuple[str, str]], plain: Any) -> list[int]:
    """The other files, each under its name (or a snippet line), then the current file's."""
    tokens: list[int] = []
    if fim.repository is not None:
        tokens += [fim.repository, *plain(_PROJECT)]
    for filename, text in files:
        if fim.file_separator is not None:
            tokens += [fim.file_separator, *plain(filename + "\n")]
        else:
            tokens += plain(_SNIPPET_SEPARATOR)
        tokens += plain(text)
    if fim.file_separator is not None:
        tokens += [fim.file_separator, *plain(_CURRENT_FILE)]
    return tokens


def _mixed(vocabulary: _Vocabulary, value: str | Sequence[str | int]) -> list[int]:
    """Text, or a list of token ids and texts, as llama-server's `tokenize_mixed` reads it
    (no special tokens parsed, none added)."""
    if isinstance(value, str):
        value = [value]
    tokens: list[int] = []
    for part in value:
        if isinstance(part, str):
            tokens += vocabulary.tokenize(part, add_bos=False, parse_special=False)
        elif 0 <= part < vocabulary.n_vocab:
            tokens.append(part)
        else:
            raise ValueError(f"token id {part} is out of range 0..{vocabulary.n_vocab - 1}")
    return tokens
