"""LlamaCppEngine: the only module that imports llama_cpp.

It drives llama.cpp's low-level API directly (`llama_decode` with a batch of one token and
llama.cpp's own sampler chain) instead of llama-cpp-python's high-level `Llama` class: measured
on the bundled model with 2 threads that is ~79 tokens/s against ~67, because sampling stays in
C and Python does only a handful of ctypes calls per token.

The KV cache of the previous request is kept; a new prompt that starts with the same tokens
only decodes what differs ("fast forwarding" in KoboldCpp's words).
"""

from __future__ import annotations

import ctypes
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp as llama
from llama_cpp.llama_grammar import json_schema_to_gbnf

from server.config import HearthSettings
from server.core.chat import ChatTemplate
from server.core.engine import EngineError
from server.core.text_stream import TokenTextPipeline
from server.core.types import (
    EngineEvent,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
)

logger = logging.getLogger(__name__)

_PIECE_BUFFER_BYTES = 256
# KoboldCpp keeps at least this share of the context for the prompt: a max_length that would
# leave less is cut down to fit.
_MIN_PROMPT_SHARE = 0.2
_DEFAULT_BATCH = 512


def model_display_name(path: Path) -> str:
    """KoboldCpp's model name: the file stem without characters outside [\\w.-]."""
    return re.sub(r"[^\w.\-]", "", path.stem)


class LlamaCppEngine:
    """One loaded GGUF with one context; generation runs on the scheduler's worker thread."""

    def __init__(self, model: Any, context: Any, path: Path, settings: HearthSettings) -> None:
        self._model = model
        self._context = context
        self._vocab = llama.llama_model_get_vocab(model)
        self._memory = llama.llama_get_memory(context)
        self._n_ctx = int(llama.llama_n_ctx(context))
        self._n_batch = settings.batchsize if settings.batchsize > 0 else _DEFAULT_BATCH
        self._n_vocab = int(llama.llama_vocab_n_tokens(self._vocab))
        self._add_bos = bool(llama.llama_vocab_get_add_bos(self._vocab))
        self._reuse_prefix = not settings.nofastforward
        self._name = model_display_name(path)
        self._piece = ctypes.create_string_buffer(_PIECE_BUFFER_BYTES)
        self._end_tokens = [
            t for t in range(self._n_vocab) if llama.llama_vocab_is_eog(self._vocab, t)
        ]
        self._batch = llama.llama_batch_init(self._n_batch, 0, 1)
        self._chat_template = ChatTemplate(
            self._metadata("tokenizer.chat_template"),
            self._metadata("general.architecture") or "",
            bos_token=self._token_bytes(llama.llama_vocab_bos(self._vocab), True).decode(),
            eos_token=self._token_bytes(llama.llama_vocab_eos(self._vocab), True).decode(),
        )
        self._cached_tokens: list[int] = []  # what sequence 0 of the KV cache holds
        self._closed = False
        self._close_lock = threading.Lock()

    # -- loading ---------------------------------------------------------------------------

    @classmethod
    def load(cls, path: Path, settings: HearthSettings) -> LlamaCppEngine:
        """Load the model and create its context, logging progress in steps of 10%."""
        _quiet_llama_logs()
        llama.llama_backend_init()
        model_params = llama.llama_model_default_params()
        model_params.n_gpu_layers = settings.gpulayers if settings.gpulayers >= 0 else 999
        progress = _ProgressReporter(path.name)
        callback = llama.llama_progress_callback(progress)
        model_params.progress_callback = callback
        model = llama.llama_model_load_from_file(str(path).encode(), model_params)
        if not model:
            raise EngineError(f"{path}: llama.cpp could not load this model file")

        threads = settings.thread_count
        batch = settings.batchsize if settings.batchsize > 0 else _DEFAULT_BATCH
        context_params = llama.llama_context_default_params()
        context_params.n_ctx = settings.contextsize
        context_params.n_batch = batch
        context_params.n_ubatch = batch
        context_params.n_seq_max = 1
        context_params.n_threads = threads
        context_params.n_threads_batch = threads
        context_params.no_perf = True
        # Sliding-window layers (Gemma 3) normally keep only the window, which makes a partial
        # cache removal impossible and so defeats prefix reuse; the full-size cache allows it.
        context_params.swa_full = True
        context = llama.llama_init_from_model(model, context_params)
        if not context:
            llama.llama_model_free(model)
            raise EngineError(f"{path}: could not create a context of {settings.contextsize}")
        logger.info(
            "Loaded %s: context %d tokens, %d threads, batch %d",
            path.name,
            settings.contextsize,
            threads,
            batch,
        )
        return cls(model, context, path, settings)

    # -- Engine protocol -------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def context_size(self) -> int:
        return self._n_ctx

    @property
    def chat_template(self) -> ChatTemplate:
        return self._chat_template

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return self._tokenize(text, add_bos=self._add_bos, parse_special=special)

    def detokenize(self, ids: list[int], special: bool = True) -> str:
        bad = [i for i in ids if not 0 <= i < self._n_vocab]
        if bad:
            raise ValueError(f"token ids out of range 0..{self._n_vocab - 1}: {bad[:5]}")
        pieces = b"".join(self._token_bytes(i, special) for i in ids)
        return pieces.decode("utf-8", errors="replace")

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineEvent]:
        started = time.perf_counter()
        schema = request.json_schema
        decision = request.schema_decision_prompt
        if (
            schema is not None
            and decision is not None
            and not self._model_says_yes(decision, cancelled)
        ):
            schema = None
        max_tokens, prompt = self._fit_to_context(request)
        reused = self._prepare_cache(prompt)
        for start in range(reused, len(prompt), self._n_batch):
            if cancelled.is_set():
                yield GenerationOutcome(
                    FinishReason.CANCELLED,
                    prompt_tokens=len(prompt),
                    seed=request.sampling.seed,
                    reused_prompt_tokens=reused,
                )
                return
            chunk = prompt[start : start + self._n_batch]
            self._decode(chunk, first_position=start, want_logits=start + len(chunk) == len(prompt))
        prompt_done = time.perf_counter()

        sampler = self._build_sampler(request.sampling, prompt, _schema_grammar(schema))
        pipeline = TokenTextPipeline(request.stop, request.trim_stop)
        finish = FinishReason.LENGTH
        stop_sequence: str | None = None
        first_text_at: float | None = None
        generated = 0
        try:
            while generated < max_tokens:
                if cancelled.is_set():
                    finish = FinishReason.CANCELLED
                    break
                if len(self._cached_tokens) >= self._n_ctx:
                    break  # the context is full: LENGTH
                token = llama.llama_sampler_sample(sampler, self._context, -1)
                if llama.llama_vocab_is_eog(self._vocab, token):
                    finish = FinishReason.STOP
                    break
                generated += 1
                text, stop_sequence = pipeline.push(self._token_bytes(token, special=False))
                if text:
                    first_text_at = first_text_at or time.perf_counter()
                    yield TokenEvent(text)
                if stop_sequence is not None:
                    finish = FinishReason.STOP
                    break
                if generated < max_tokens:
                    self._decode([token], first_position=len(self._cached_tokens), want_logits=True)
        finally:
            llama.llama_sampler_free(sampler)
        if stop_sequence is None and (rest := pipeline.finish()):
            first_text_at = first_text_at or time.perf_counter()
            yield TokenEvent(rest)
        finished = time.perf_counter()
        yield GenerationOutcome(
            finish,
            prompt_tokens=len(prompt),
            completion_tokens=generated,
            prompt_seconds=prompt_done - started,
            generation_seconds=finished - prompt_done,
            time_to_first_token=None if first_text_at is None else first_text_at - started,
            seed=request.sampling.seed,
            stop_sequence=stop_sequence,
            reused_prompt_tokens=reused,
            constrained=schema is not None,
        )

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            llama.llama_batch_free(self._batch)
            llama.llama_free(self._context)
            llama.llama_model_free(self._model)

    # -- internals -------------------------------------------------------------------------

    def _metadata(self, key: str) -> str | None:
        size = llama.llama_model_meta_val_str(self._model, key.encode(), None, 0)
        if size < 0:
            return None
        buffer = ctypes.create_string_buffer(size + 1)
        llama.llama_model_meta_val_str(self._model, key.encode(), buffer, size + 1)
        return buffer.value.decode("utf-8", errors="replace")

    def _tokenize(self, text: str, *, add_bos: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buffer = (llama.llama_token * capacity)()
        count = llama.llama_tokenize(
            self._vocab, data, len(data), buffer, capacity, add_bos, parse_special
        )
        if count < 0:  # buffer too small: llama.cpp says how many it needs
            capacity = -count
            buffer = (llama.llama_token * capacity)()
            count = llama.llama_tokenize(
                self._vocab, data, len(data), buffer, capacity, add_bos, parse_special
            )
        return list(buffer[:count])

    def _token_bytes(self, token: int, special: bool) -> bytes:
        length = llama.llama_token_to_piece(
            self._vocab, token, self._piece, _PIECE_BUFFER_BYTES, 0, special
        )
        if length < 0:  # piece longer than the buffer (never seen in practice)
            bigger = ctypes.create_string_buffer(-length)
            length = llama.llama_token_to_piece(self._vocab, token, bigger, -length, 0, special)
            return bigger.raw[:length]
        return self._piece.raw[:length]

    def _fit_to_context(self, request: GenerationRequest) -> tuple[int, list[int]]:
        """Clamp max_tokens and trim the prompt's front so both fit; `memory` stays whole."""
        limit = self._n_ctx
        if request.max_context_length is not None:
            limit = min(limit, request.max_context_length)
        max_tokens = min(request.max_tokens, int(limit * (1 - _MIN_PROMPT_SHARE)))
        max_tokens = max(max_tokens, 1)
        memory = self._tokenize(request.memory, add_bos=self._add_bos, parse_special=True)
        prompt = self._tokenize(
            request.prompt, add_bos=self._add_bos and not memory, parse_special=True
        )
        room = max(limit - max_tokens - len(memory), 1)
        if len(prompt) > room:
            prompt = prompt[len(prompt) - room :]
        tokens = memory + prompt
        if not tokens:  # an empty prompt still needs one token to predict from
            tokens = [int(llama.llama_vocab_bos(self._vocab))]
        return max_tokens, tokens[-limit:]

    def _prepare_cache(self, prompt: list[int]) -> int:
        """Drop what the cache holds beyond the shared prefix; return how many tokens it keeps."""
        keep = 0
        if self._reuse_prefix:
            limit = min(len(self._cached_tokens), len(prompt) - 1)  # re-decode the last token
            while keep < limit and self._cached_tokens[keep] == prompt[keep]:
                keep += 1
        if keep < len(self._cached_tokens) and not llama.llama_memory_seq_rm(
            self._memory, 0, keep, -1
        ):
            llama.llama_memory_clear(self._memory, True)
            keep = 0
        self._cached_tokens = self._cached_tokens[:keep]
        return keep

    def _decode(self, tokens: list[int], *, first_position: int, want_logits: bool) -> None:
        batch = self._batch
        last = len(tokens) - 1
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = first_position + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = want_logits and i == last
        batch.n_tokens = len(tokens)
        status = llama.llama_decode(self._context, batch)
        if status != 0:
            # The cache may now hold part of the batch; forget it rather than trust it.
            llama.llama_memory_clear(self._memory, True)
            self._cached_tokens = []
            raise EngineError(f"llama_decode failed with status {status}")
        self._cached_tokens.extend(tokens)

    def _model_says_yes(self, question_prompt: str, cancelled: threading.Event) -> bool:
        """A hidden, grammar-bound yes/no answer (greedy), e.g. "does this need a tool?"."""
        prompt = self._tokenize(question_prompt, add_bos=self._add_bos, parse_special=True)
        prompt = prompt[-(self._n_ctx - 4) :]
        reused = self._prepare_cache(prompt)
        for start in range(reused, len(prompt), self._n_batch):
            if cancelled.is_set():
                return False
            chunk = prompt[start : start + self._n_batch]
            self._decode(chunk, first_position=start, want_logits=start + len(chunk) == len(prompt))
        sampler = self._build_sampler(SamplingParams(temperature=0.0), prompt, _YES_NO_GRAMMAR)
        try:
            token = llama.llama_sampler_sample(sampler, self._context, -1)
        finally:
            llama.llama_sampler_free(sampler)
        answer = self._token_bytes(token, special=False).decode("utf-8", errors="replace")
        logger.info("Tool decision: %s", answer.strip() or "(nothing)")
        return answer.strip().lower().startswith("y")

    def _build_sampler(
        self, sampling: SamplingParams, prompt: list[int], grammar: str | None = None
    ) -> Any:
        chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
        add = llama.llama_sampler_chain_add
        if grammar is not None:
            # First in the chain, over the whole vocabulary: later samplers then only ever see
            # tokens the grammar allows, so sampling can never get stuck.
            constraint = llama.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
            if not constraint:
                llama.llama_sampler_free(chain)
                raise EngineError("llama.cpp rejected the grammar for this request")
            add(chain, constraint)
        if sampling.ban_eos and grammar is None and self._end_tokens:
            biases = (llama.llama_logit_bias * len(self._end_tokens))()
            for slot, token in zip(biases, self._end_tokens, strict=True):
                slot.token = token
                slot.bias = float("-inf")
            add(chain, llama.llama_sampler_init_logit_bias(self._n_vocab, len(biases), biases))
        penalise = sampling.rep_pen != 1.0 or sampling.presence_penalty != 0.0
        if penalise:
            last_n = sampling.rep_pen_range if sampling.rep_pen_range > 0 else self._n_ctx
            add(
                chain,
                llama.llama_sampler_init_penalties(
                    self._n_vocab, last_n, sampling.rep_pen, 0.0, sampling.presence_penalty
                ),
            )
        if sampling.temperature <= 0.0:
            add(chain, llama.llama_sampler_init_greedy())
        else:
            if sampling.top_k > 0:
                add(chain, llama.llama_sampler_init_top_k(sampling.top_k))
            if sampling.top_p < 1.0:
                add(chain, llama.llama_sampler_init_top_p(sampling.top_p, 1))
            if sampling.min_p > 0.0:
                add(chain, llama.llama_sampler_init_min_p(sampling.min_p, 1))
            add(chain, llama.llama_sampler_init_temp(sampling.temperature))
            add(chain, llama.llama_sampler_init_dist(sampling.seed & 0xFFFFFFFF))
        if penalise:
            # Repetition penalty looks back over the prompt too, as in KoboldCpp.
            for token in prompt[-(sampling.rep_pen_range or len(prompt)) :]:
                llama.llama_sampler_accept(chain, token)
        return chain


# One token is enough: " yes"/" no" style pieces are single tokens in every common vocabulary.
_YES_NO_GRAMMAR = 'root ::= "yes" | "no" | "Yes" | "No"'


def _schema_grammar(schema: dict[str, Any] | None) -> str | None:
    if schema is None:
        return None
    try:
        return str(json_schema_to_gbnf(json.dumps(schema)))
    except Exception as exc:  # the converter raises assorted errors on unsupported schemas
        raise EngineError(f"cannot turn this JSON schema into a grammar: {exc}") from exc


class _ProgressReporter:
    """llama.cpp's load-progress callback, logging each further 10%."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._next_step = 0

    def __call__(self, progress: float, _user_data: Any) -> bool:
        percent = int(progress * 100)
        if percent >= self._next_step:
            logger.info("Loading %s: %d%%", self._label, percent)
            self._next_step = (percent // 10 + 1) * 10
        return True  # keep loading


_GGML_LOG_LEVEL_ERROR = 4  # ggml.h of the vendored llama.cpp (not the older _logger.py table)


def _forward_llama_log(level: int, text: bytes, _user_data: Any) -> None:
    # llama.cpp narrates every load in detail (and warns about harmless quirks of many GGUFs);
    # the console keeps only its errors, so Hearth's own progress lines stay readable.
    if level == _GGML_LOG_LEVEL_ERROR:
        logger.error("llama.cpp: %s", text.decode("utf-8", errors="replace").rstrip())


# Kept at module level: llama.cpp holds the C pointer for as long as the process lives.
_LLAMA_LOG_CALLBACK = llama.llama_log_callback(_forward_llama_log)


def _quiet_llama_logs() -> None:
    llama.llama_log_set(_LLAMA_LOG_CALLBACK, ctypes.c_void_p(0))
