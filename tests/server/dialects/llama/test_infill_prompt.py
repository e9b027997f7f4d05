"""The /infill prompt as llama-server builds it, token by token, on the tiny FIM model's
vocabulary (tests/support/fim_gguf.py, read without weights): the suffix-first order
(--spm-infill), what is cut when the code does not fit, and a model without the repository
and file tokens. Over HTTP: tests/server/dialects/llama/test_infill_real.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.core.llama.loading.model import Vocabulary
from server.core.types import InfillParts
from tests.support.fim_gguf import BOS, FIM_IDS, write_fim_gguf

PRE, SUF, MID, REP, SEP = (FIM_IDS[role] for role in ("pre", "suf", "mid", "rep", "sep"))


def _load(path: Path, context: int = 2048) -> Vocabulary:
    fim_vocabulary = Vocabulary.load_vocab_only(path)
    fim_vocabulary.slot_context = context
    return fim_vocabulary


@pytest.fixture(scope="module")
def fim_vocabulary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vocabulary]:
    loaded = _load(write_fim_gguf(tmp_path_factory.mktemp("fim") / "fim.gguf"))
    yield loaded
    loaded.free_vocabulary()


def plain(fim_vocabulary: Vocabulary, text: str) -> list[int]:
    return fim_vocabulary.tokenize(text, add_bos=False, parse_special=False)


def test_prefix_suffix_middle_in_the_model_s_tokens(fim_vocabulary: Vocabulary) -> None:
    parts = InfillParts("ab", "cd", (("u.c", "zz"),), "x")
    ids = fim_vocabulary.infill_prompt(parts, batch=512, generate=16, spm=False)
    t = lambda text: plain(fim_vocabulary, text)  # noqa: E731 - a short name for a long call
    assert ids == [
        *[REP, *t("myproject\n"), SEP, *t("u.c\n"), *t("zz"), SEP, *t("filename\n")],
        *[BOS, PRE, *t("ab"), *fim_vocabulary.tokenize("x", add_bos=False, parse_special=True)],
        *[SUF, *t("cd"), MID],
    ]


def test_spm_puts_the_suffix_before_the_prefix(fim_vocabulary: Vocabulary) -> None:
    ids = fim_vocabulary.infill_prompt(InfillParts("ab", "cd"), batch=512, generate=16, spm=True)
    start = ids.index(BOS)
    assert ids[start:] == [
        BOS,
        SUF,
        *plain(fim_vocabulary, "cd"),
        PRE,
        *plain(fim_vocabulary, "ab"),
        MID,
    ]


def test_what_does_not_fit_is_cut_as_llama_server_cuts_it(fim_vocabulary: Vocabulary) -> None:
    prefix, suffix, extra = "p" * 100, "s" * 100, "e" * 100
    parts = InfillParts(prefix, suffix, (("f", extra),), "")
    # A batch of 40: the prefix keeps its last 30 tokens, the suffix its first 40/4 - 2 - 0;
    # the context beyond the batch and twice the 10 tokens to generate holds 50 extra tokens.
    extra_ids = [REP, *plain(fim_vocabulary, "myproject\n"), SEP, *plain(fim_vocabulary, "f\n")]
    extra_ids += [*plain(fim_vocabulary, extra), SEP, *plain(fim_vocabulary, "filename\n")]
    cut = _load(fim_vocabulary.path, context=40 + 20 + 50)
    try:
        ids = cut.infill_prompt(parts, batch=40, generate=10, spm=False)
    finally:
        cut.free_vocabulary()
    assert ids == [
        *extra_ids[-50:],
        *[BOS, PRE, *plain(fim_vocabulary, prefix)[-30:]],
        *[SUF, *plain(fim_vocabulary, suffix)[:8], MID],
    ]


def test_without_file_tokens_other_files_follow_a_snippet_line(tmp_path: Path) -> None:
    path = write_fim_gguf(tmp_path / "fim.gguf", fim_roles=frozenset({"pre", "suf", "mid"}))
    fim_vocabulary = _load(path)
    try:
        parts = InfillParts("ab", "cd", (("u.c", "zz"),))
        ids = fim_vocabulary.infill_prompt(parts, batch=512, generate=16, spm=False)
        snippet = plain(fim_vocabulary, "\n\n--- snippet ---\n\n")
        assert ids[: ids.index(BOS)] == [*snippet, *plain(fim_vocabulary, "zz")]
        assert fim_vocabulary.missing_fim_tokens() == []
    finally:
        fim_vocabulary.free_vocabulary()


def test_the_missing_roles_are_named(tmp_path: Path) -> None:
    fim_vocabulary = _load(write_fim_gguf(tmp_path / "fim.gguf", fim_roles=frozenset({"pre"})))
    try:
        assert fim_vocabulary.missing_fim_tokens() == ["suffix", "middle"]
    finally:
        fim_vocabulary.free_vocabulary()
