"""Embeddings: a small llama.cpp context of its own, on the chat model or on a separate file.

The context is separate from the one that generates, so embedding never touches the chat
KV cache (or its reused prefixes). Several inputs go into one `llama_batch` as different
sequences and are decoded once; llama.cpp pools each sequence (--pooling, else the model's
own pooling when its GGUF declares one, else the mean over its tokens) and Hearth
L2-normalises the result. With --pooling none nothing is pooled: each input gives its tokens'
raw output vectors (server/core/llama/embedding/pooling.py).

Sizes, and why:
- A pooled sequence must lie within one micro-batch (llama.cpp overwrites a sequence's pooled
  vector with each micro-batch it appears in), so n_batch = n_ubatch = n_ctx, the cache is
  unified (a per-sequence cache splits the batch into equal slices of every sequence), and
  no input may be longer than that: `capacity` tokens.
- An embedding context makes llama.cpp compute every token's logits too, over the whole
  vocabulary (~1 MiB per token for Gemma 3's 262k): so the capacity is one batch
  (--batchsize), not the context size.
- llama.cpp reserves its graph for n_ubatch / n_seq_max tokens per sequence and aborts the
  process when that does not divide: the capacity is a multiple of `_SEQUENCES`.

Reranking (llama-server's /rerank, --rerank) is a second Embedder on the same model, made on
the first rank request: its context pools with the model's rank head (LLAMA_POOLING_TYPE_RANK)
and each document's "vector" is its one score, unnormalised, its prompt built with the query
(server/core/llama/embedding/rerank.py). llama.cpp reads a headless model's score at an offset made
for one value per sequence, right only for the first sequence of a decode: such a model gets one
document per decode.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp as llama

from server.core.llama.embedding.pooling import (
    Vector,
    output_size,
    pooled_vector,
    pooling_type,
    token_vectors,
)
from server.core.llama.embedding.rerank import has_rank_head, rerank_tokens
from server.core.llama.loading.model import Vocabulary
from server.core.llama.loading.native import quiet_llama_logs
from server.core.load_settings import LoadSettings
from server.core.scheduling.engine import EngineError
from server.core.types import (
    EmbeddingsEvent,
    EmbedInput,
    EngineEvent,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
)

logger = logging.getLogger(__name__)

# Sequences of the embedding context: up to 15 inputs per decode, and the last one pads.
_SEQUENCES = 16
_PADDING_SEQUENCE = _SEQUENCES - 1
# llama.cpp's repacked CPU kernels multiply rows in groups of 4 and the rest one by one, which
# rounds differently: a decode is padded to a multiple of 4 rows so an input's vector does not
# depend on how many rows the other inputs of its batch had.
_ROW_GROUP = 4
# What a decode gives each input: its pooled vector alone, or (no pooling) one per token.
_Outputs = tuple[Vector, ...]


class InputRejectedError(ValueError):
    """An input the model cannot embed as sent (too long, no tokens, unknown token ids)."""


@dataclass(frozen=True, slots=True)
class _Tokens:
    index: int  # the input's place in the request
    ids: list[int]


class Embedder:
    """Turns embedding requests into vectors; runs on the scheduler's worker thread."""

    def __init__(
        self,
        vocabulary: Vocabulary,
        settings: LoadSettings,
        *,
        owns_model: bool,
        rank: bool = False,
    ):
        self._vocabulary = vocabulary
        self._settings = settings
        self._owns_model = owns_model  # a separate --embeddingsmodel: freed with the context
        self._rank = rank  # scores documents against a query (see the module's docstring)
        self._ranker: Embedder | None = None  # this model's rank context, made when first asked
        self._pooling = (
            llama.LLAMA_POOLING_TYPE_RANK if rank else pooling_type(vocabulary, settings.pooling)
        )
        ranks = self._pooling == llama.LLAMA_POOLING_TYPE_RANK
        headless = ranks and not has_rank_head(vocabulary.path)
        self._per_decode = 1 if headless else _PADDING_SEQUENCE
        model = vocabulary.model
        if llama.llama_model_has_encoder(model) and llama.llama_model_has_decoder(model):
            raise EngineError(f"{vocabulary.path}: encoder-decoder models cannot give embeddings")
        self._encoder_only = bool(llama.llama_model_has_encoder(model))
        trained = int(llama.llama_model_n_ctx_train(model)) or settings.contextsize
        fitting = min(settings.batch_size, settings.contextsize, trained)
        self.capacity = max(_SEQUENCES, fitting // _SEQUENCES * _SEQUENCES)
        self.size = output_size(model, self._pooling)
        self._context = llama.llama_init_from_model(model, self._context_params(settings))
        if not self._context:
            raise EngineError(f"{vocabulary.path}: could not create an embedding context")
        self._memory = llama.llama_get_memory(self._context)
        self._batch = llama.llama_batch_init(self.capacity, 0, 1)
        self._pad_token = vocabulary.bos if vocabulary.bos >= 0 else 0
        self._eos = int(llama.llama_vocab_eos(vocabulary.vocab))
        self._adds_eos = bool(llama.llama_vocab_get_add_eos(vocabulary.vocab))
        self._closed = False

    @classmethod
    def on_model(cls, vocabulary: Vocabulary, settings: LoadSettings) -> Embedder:
        """An embedder sharing a loaded chat model's weights (its own context)."""
        return cls(vocabulary, settings, owns_model=False)

    @classmethod
    def load(cls, path: Path, settings: LoadSettings) -> Embedder:
        """--embeddingsmodel: load the file (on the CPU, as KoboldCpp does by default: an
        embedding model is small and its decodes short) and create its context."""
        quiet_llama_logs()
        llama.llama_backend_init()
        params = llama.llama_model_default_params()
        params.n_gpu_layers = 0
        model = llama.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise EngineError(f"{path}: llama.cpp could not load this embeddings model")
        try:
            embedder = cls(Vocabulary(model, path), settings, owns_model=True)
        except Exception:
            llama.llama_model_free(model)
            raise
        logger.info(
            "Embeddings model %s: %d dimensions, at most %d tokens per input",
            path.name,
            embedder.size,
            embedder.capacity,
        )
        return embedder

    def _context_params(self, settings: LoadSettings) -> Any:
        params = llama.llama_context_default_params()
        params.n_ctx = self.capacity
        params.n_batch = self.capacity
        params.n_ubatch = self.capacity
        params.n_seq_max = _SEQUENCES
        params.kv_unified = True
        params.embeddings = True
        params.pooling_type = self._pooling
        params.n_threads = settings.thread_count
        params.n_threads_batch = settings.thread_count
        params.no_perf = True
        return params

    # -- embedding -------------------------------------------------------------------------

    def embed(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineEvent]:
        """One EmbeddingsEvent (a unit vector per input, in order; for a rank request a
        score per document; with no pooling each input's token vectors), then the outcome."""
        if request.rank_query is not None and not self._rank:
            yield from self._rank_context().embed(request, cancelled)
            return
        started = time.perf_counter()
        try:
            inputs = [
                _Tokens(index, self._tokens(index, item, request))
                for index, item in enumerate(request.embed_inputs)
            ]
        except InputRejectedError as exc:
            yield GenerationOutcome(FinishReason.ERROR, error=str(exc), input_rejected=True)
            return
        outputs: list[_Outputs] = []
        decodes = 0
        for group in self._decode_groups(inputs):
            if cancelled.is_set():
                yield self._outcome(FinishReason.CANCELLED, inputs, started)
                return
            outputs += self._decode(group)
            decodes += 1
        counts = tuple(len(item.ids) for item in inputs)
        if self._pooling == llama.LLAMA_POOLING_TYPE_NONE:
            yield EmbeddingsEvent((), counts, decodes, token_vectors=tuple(outputs))
        else:
            yield EmbeddingsEvent(tuple(pooled for (pooled,) in outputs), counts, decodes)
        yield self._outcome(FinishReason.STOP, inputs, started)

    def _tokens(self, index: int, item: EmbedInput, request: GenerationRequest) -> list[int]:
        """An input's tokens: text with the model's special tokens (BOS, and EOS/SEP where
        the vocabulary adds one), token ids as given; cut to the capacity if allowed."""
        vocabulary = self._vocabulary
        if self._rank and isinstance(item, str):
            ids = rerank_tokens(vocabulary, request.rank_query or "", item)
        elif isinstance(item, str):
            ids = vocabulary.tokenize(item, add_bos=True, parse_special=True)
        else:
            ids = list(item)
            bad = [token for token in ids if not 0 <= token < vocabulary.n_vocab]
            if bad:
                raise InputRejectedError(
                    f"input {index}: token ids out of range 0..{vocabulary.n_vocab - 1}: {bad[:5]}"
                )
        if not ids:
            raise InputRejectedError(f"input {index} has no tokens to embed")
        if len(ids) <= self.capacity:
            return ids
        if not request.embed_truncate:
            raise InputRejectedError(
                f"input {index} is {len(ids)} tokens long; this model embeds at most "
                f"{self.capacity} tokens per input (--batchsize)"
            )
        logger.warning(
            "[%s] input %d: %d tokens, only the first %d are embedded",
            request.request_id,
            index,
            len(ids),
            self.capacity,
        )
        # The start of a text usually says what it is about; a closing EOS/SEP stays, as the
        # model was trained to see one.
        if self._adds_eos and ids[-1] == self._eos:
            return [*ids[: self.capacity - 1], self._eos]
        return ids[: self.capacity]

    def _decode_groups(self, inputs: list[_Tokens]) -> Iterator[list[_Tokens]]:
        """Consecutive inputs that fit one decode (rows and sequences), in order."""
        group: list[_Tokens] = []
        rows = 0
        for item in inputs:
            full = len(group) == self._per_decode or rows + len(item.ids) > self.capacity
            if group and full:
                yield group
                group, rows = [], 0
            group.append(item)
            rows += len(item.ids)
        if group:
            yield group

    def _decode(self, group: list[_Tokens]) -> list[_Outputs]:
        """Decode a group's inputs at once, one sequence each; each input's pooled vector, or
        with no pooling its tokens' vectors."""
        batch = self._batch
        row = 0
        for sequence, item in enumerate(group):
            for position, token in enumerate(item.ids):
                self._put(row, token, position, sequence)
                row += 1
        # capacity is a multiple of _ROW_GROUP, so the padding always fits.
        for position in range(-row % _ROW_GROUP):
            self._put(row, self._pad_token, position, _PADDING_SEQUENCE)
            row += 1
        batch.n_tokens = row
        # Stale cells from the last request would clash with these positions.
        llama.llama_memory_clear(self._memory, True)
        process = llama.llama_encode if self._encoder_only else llama.llama_decode
        status = process(self._context, batch)
        if status != 0:
            raise EngineError(f"embedding decode failed with status {status}")
        if self._pooling != llama.LLAMA_POOLING_TYPE_NONE:
            return [
                (pooled_vector(self._context, sequence, self._pooling, self.size),)
                for sequence in range(len(group))
            ]
        outputs = []
        first = 0  # the inputs' rows follow one another, in order, from row 0
        for item in group:
            rows = range(first, first + len(item.ids))
            outputs.append(token_vectors(self._context, rows, self.size))
            first = rows.stop
        return outputs

    def _put(self, row: int, token: int, position: int, sequence: int) -> None:
        batch = self._batch
        batch.token[row] = token
        batch.pos[row] = position
        batch.n_seq_id[row] = 1
        batch.seq_id[row][0] = sequence
        batch.logits[row] = True  # pooling reads every token's output (so does no pooling)

    def _outcome(
        self, reason: FinishReason, inputs: list[_Tokens], started: float
    ) -> GenerationOutcome:
        return GenerationOutcome(
            reason,
            prompt_tokens=sum(len(item.ids) for item in inputs),
            prompt_seconds=time.perf_counter() - started,
        )

    def _rank_context(self) -> Embedder:
        if self._ranker is None:
            self._ranker = Embedder(self._vocabulary, self._settings, owns_model=False, rank=True)
        return self._ranker

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._ranker is not None:  # its context uses the model: freed first
            self._ranker.close()
        llama.llama_batch_free(self._batch)
        llama.llama_free(self._context)
        if self._owns_model:
            llama.llama_model_free(self._vocabulary.model)
