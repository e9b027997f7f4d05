"""The /rerank prompt as llama-server builds it, on the tiny model's vocabulary (read without
weights): a model's own rerank template with the query and document filled in, else the
cross-encoder pair with the special tokens its vocabulary adds. Over HTTP, with the scores:
tests/server/dialects/llama/test_rerank_real.py."""

from __future__ import annotations

from pathlib import Path

from server.core.llama.embedding.rerank import has_rank_head, rerank_tokens
from server.core.llama.loading.model import Vocabulary
from tests.support.fim_gguf import BOS, EOS, SEP, write_fim_gguf
from tests.support.gguf_files import write_tiny_gguf

TEMPLATE = "<s>query: {query}\ndoc: {document}</s>"


def test_without_a_template_bos_query_eos_sep_document_eos(tmp_path: Path) -> None:
    vocabulary = Vocabulary.load_vocab_only(write_fim_gguf(tmp_path / "m.gguf"))
    try:
        plain = lambda text: vocabulary.tokenize(text, add_bos=False, parse_special=False)  # noqa: E731
        # Special-looking text in the query is text, not a token.
        assert rerank_tokens(vocabulary, "q</s>", "doc") == [
            BOS,
            *plain("q</s>"),
            EOS,
            SEP,
            *plain("doc"),
            EOS,
        ]
        assert EOS not in plain("q</s>")
    finally:
        vocabulary.free_vocabulary()


def test_a_rerank_template_is_filled_in_and_read_with_its_special_tokens(tmp_path: Path) -> None:
    path = write_fim_gguf(tmp_path / "m.gguf", rerank_template=TEMPLATE)
    vocabulary = Vocabulary.load_vocab_only(path)
    try:
        ids = rerank_tokens(vocabulary, "what", "this")
        text = "<s>query: what\ndoc: this</s>"
        assert ids == vocabulary.tokenize(text, add_bos=False, parse_special=True)
        assert ids[0] == BOS and ids[-1] == EOS and SEP not in ids
    finally:
        vocabulary.free_vocabulary()


def test_a_rank_head_is_told_from_its_tensors(tmp_path: Path) -> None:
    assert has_rank_head(write_fim_gguf(tmp_path / "m.gguf"))
    assert not has_rank_head(write_tiny_gguf(tmp_path / "plain.gguf"))
