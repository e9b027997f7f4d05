"""A tiny code model with fill-in-the-middle tokens and a rank head, random weights, for tests.

Neither the bundled model nor SmolLM2 has FIM tokens or a rank head, so the /infill and
/v1/rerank tests build one: llama.cpp's `qwen3` architecture (the one whose loader reads a
`cls.output` rank head, as Qwen3-Reranker has; vendor/llama.cpp/src/models/qwen3.cpp in the
llama-cpp-python 0.3.36 sdist), one block of 32 channels, pooling type RANK with two
classifier labels (llama.cpp soft-maxes a qwen3 head, so one label would always score 1.0).

The vocabulary is a SentencePiece ("llama") one of a few hundred tokens: the 256 byte tokens,
printable ASCII, and control tokens. The FIM tokens sit at ids out of their usual order
(`FIM_IDS`) and are named by id in the header, so a prompt built by role, not by position,
is what a test sees.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

UNK, BOS, EOS, SEP = 0, 1, 2, 3
# Deliberately not in prefix, suffix, middle order.
FIM_IDS = {"mid": 4, "suf": 5, "pre": 6, "sep": 7, "rep": 8, "pad": 9}
_FIM_NAMES = {
    "pre": "<|fim_prefix|>",
    "suf": "<|fim_suffix|>",
    "mid": "<|fim_middle|>",
    "pad": "<|fim_pad|>",
    "rep": "<|repo_name|>",
    "sep": "<|file_sep|>",
}
_FIM_KEYS = {
    "pre": gguf.Keys.Tokenizer.FIM_PRE_ID,
    "suf": gguf.Keys.Tokenizer.FIM_SUF_ID,
    "mid": gguf.Keys.Tokenizer.FIM_MID_ID,
    "pad": gguf.Keys.Tokenizer.FIM_PAD_ID,
    "rep": gguf.Keys.Tokenizer.FIM_REP_ID,
    "sep": gguf.Keys.Tokenizer.FIM_SEP_ID,
}
_FIRST_BYTE = 10
_FIRST_CHARACTER = _FIRST_BYTE + 256  # then printable ASCII, from the space ("\u2581")
_WIDTH, _HEADS, _FFN = 32, 2, 64
_TT = gguf.TokenType


def character_token(character: str) -> int:
    """The id of a printable ASCII character's own token (a space is SentencePiece's)."""
    return _FIRST_CHARACTER + ord(character) - 0x20


def _vocabulary(fim_roles: set[str]) -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>", "[SEP]"]
    types = [_TT.UNKNOWN, _TT.CONTROL, _TT.CONTROL, _TT.CONTROL]
    for role, token_id in sorted(FIM_IDS.items(), key=lambda item: item[1]):
        # A role the model lacks gets a name llama.cpp does not recognise as that role.
        tokens.append(_FIM_NAMES[role] if role in fim_roles else f"<unused{token_id}>")
        types.append(_TT.CONTROL)
    tokens += [f"<0x{value:02X}>" for value in range(256)]
    types += [_TT.BYTE] * 256
    scores = [0.0] * len(tokens)
    for code in range(0x20, 0x7F):
        tokens.append("\u2581" if code == 0x20 else chr(code))
        types.append(_TT.NORMAL)
        scores.append(-1.0)
    return tokens, scores, [int(kind) for kind in types]


def write_fim_gguf(
    path: Path,
    *,
    fim_roles: frozenset[str] = frozenset(FIM_IDS),
    rerank_template: str | None = None,
    seed: int = 7,
) -> Path:
    """Write the model to `path`. `fim_roles`: which FIM tokens it has (all by default);
    `rerank_template`: a `tokenizer.chat_template.rerank` with {query} and {document}."""
    writer = gguf.GGUFWriter(str(path), "qwen3")
    _write_hyperparameters(writer)
    _write_tokenizer(writer, set(fim_roles), rerank_template)
    _write_tensors(writer, len(_vocabulary(set(fim_roles))[0]), np.random.default_rng(seed))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _write_hyperparameters(writer: gguf.GGUFWriter) -> None:
    writer.add_name("tiny-fim-reranker")
    writer.add_context_length(2048)
    writer.add_embedding_length(_WIDTH)
    writer.add_block_count(1)
    writer.add_feed_forward_length(_FFN)
    writer.add_head_count(_HEADS)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    writer.add_pooling_type(gguf.PoolingType.RANK)
    writer.add_classifier_output_labels(["yes", "no"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)


def _write_tokenizer(
    writer: gguf.GGUFWriter, fim_roles: set[str], rerank_template: str | None
) -> None:
    tokens, scores, types = _vocabulary(fim_roles)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(UNK)
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_sep_token_id(SEP)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_sep_token(True)
    for role in fim_roles:
        writer.add_uint32(_FIM_KEYS[role], FIM_IDS[role])
    writer.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    if rerank_template is not None:
        writer.add_string("tokenizer.chat_template.rerank", rerank_template)


def _write_tensors(writer: gguf.GGUFWriter, n_vocab: int, rng: np.random.Generator) -> None:
    head = _WIDTH // _HEADS

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    ones = np.ones  # norms: 1 keeps the random activations in range
    # numpy shapes are ggml's reversed: (rows, columns) = (ne[1], ne[0]).
    writer.add_tensor("token_embd.weight", weights(n_vocab, _WIDTH))
    writer.add_tensor("output_norm.weight", ones(_WIDTH, dtype=np.float32))
    writer.add_tensor("cls.output.weight", weights(2, _WIDTH) * 2)
    writer.add_tensor("blk.0.attn_norm.weight", ones(_WIDTH, dtype=np.float32))
    writer.add_tensor("blk.0.attn_q.weight", weights(_HEADS * head, _WIDTH))
    writer.add_tensor("blk.0.attn_k.weight", weights(head, _WIDTH))
    writer.add_tensor("blk.0.attn_v.weight", weights(head, _WIDTH))
    writer.add_tensor("blk.0.attn_output.weight", weights(_WIDTH, _HEADS * head))
    writer.add_tensor("blk.0.attn_q_norm.weight", ones(head, dtype=np.float32))
    writer.add_tensor("blk.0.attn_k_norm.weight", ones(head, dtype=np.float32))
    writer.add_tensor("blk.0.ffn_norm.weight", ones(_WIDTH, dtype=np.float32))
    writer.add_tensor("blk.0.ffn_gate.weight", weights(_FFN, _WIDTH))
    writer.add_tensor("blk.0.ffn_up.weight", weights(_FFN, _WIDTH))
    writer.add_tensor("blk.0.ffn_down.weight", weights(_WIDTH, _FFN))
