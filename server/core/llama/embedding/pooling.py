"""How an embedding context pools a sequence's token outputs, and reading what it gives.

The pooling is llama-server's --pooling when the user chose one, else the model's own (its
GGUF's `<architecture>.pooling_type`: CLS for BERT-style models, the last token for some decoder
embedders), else the mean of the tokens, as a chat model declares none. What comes out:
- mean, cls, last: one vector per sequence, which Hearth scales to unit length;
- rank: the rank head's scores per sequence (one for a reranker), as they are;
- none: nothing pooled; each token's output vector, raw, as llama-server's /embeddings gives
  them (a length would mean nothing: the vectors are the model's hidden state).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import llama_cpp as llama

from server.core.scheduling.engine import EngineError

# --pooling's words and llama.cpp's pooling types.
ASKED_POOLINGS = {
    "none": llama.LLAMA_POOLING_TYPE_NONE,
    "mean": llama.LLAMA_POOLING_TYPE_MEAN,
    "cls": llama.LLAMA_POOLING_TYPE_CLS,
    "last": llama.LLAMA_POOLING_TYPE_LAST,
    "rank": llama.LLAMA_POOLING_TYPE_RANK,
}
# The poolings a model's own declaration is followed for (its rank head serves /rerank only).
_DECLARED_POOLINGS = {
    llama.LLAMA_POOLING_TYPE_MEAN,
    llama.LLAMA_POOLING_TYPE_CLS,
    llama.LLAMA_POOLING_TYPE_LAST,
}

Vector = tuple[float, ...]


class _Metadata(Protocol):
    def metadata(self, key: str) -> str | None: ...


def pooling_type(vocabulary: _Metadata, asked: str | None) -> int:
    """llama.cpp's pooling type for `asked` (--pooling), else the model's own, else the mean."""
    if asked is not None:
        return ASKED_POOLINGS[asked]
    architecture = vocabulary.metadata("general.architecture") or ""
    declared = vocabulary.metadata(f"{architecture}.pooling_type")
    pooling = int(declared) if declared is not None and declared.isdigit() else None
    return pooling if pooling in _DECLARED_POOLINGS else llama.LLAMA_POOLING_TYPE_MEAN


def output_size(model: Any, pooling: int) -> int:
    """How many values a sequence's output has: the rank head's scores for rank pooling, else
    the model's output embedding size."""
    if pooling == llama.LLAMA_POOLING_TYPE_RANK:
        return max(1, int(llama.llama_model_n_cls_out(model)))
    return int(llama.llama_model_n_embd_out(model))


def pooled_vector(context: Any, sequence: int, pooling: int, size: int) -> Vector:
    """A decoded sequence's pooled output: a unit vector, or a rank head's scores."""
    pooled = llama.llama_get_embeddings_seq(context, sequence)
    if not pooled:
        raise EngineError("llama.cpp returned no pooled embedding")
    if pooling == llama.LLAMA_POOLING_TYPE_RANK:
        return tuple(pooled[:size])
    return unit(pooled[:size])


def token_vectors(context: Any, rows: Sequence[int], size: int) -> tuple[Vector, ...]:
    """The raw output vectors of these batch rows (a sequence's tokens, in order)."""
    vectors = []
    for row in rows:
        output = llama.llama_get_embeddings_ith(context, row)
        if not output:
            raise EngineError(f"llama.cpp returned no embedding for batch row {row}")
        vectors.append(tuple(output[:size]))
    return tuple(vectors)


def unit(values: list[float]) -> Vector:
    """`values` scaled to length 1 (Euclidean), as OpenAI's and Ollama's vectors are."""
    norm = math.sqrt(math.fsum(value * value for value in values))
    if norm == 0.0:
        return tuple(values)
    return tuple(value / norm for value in values)
