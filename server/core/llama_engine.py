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
from dataclasses import dataclass, field
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
# With parallel slots, prompts are decoded in blocks of this many tokens aligned to absolute
# positions, and only whole blocks are reused from the cache. llama.cpp's logits depend on
# where a sequence's prompt is cut into decode calls (measured: up to 0.6 apart on the bundled
# model), though not on which other sequences share a call; fixed cuts make a request give the
# same text alone or batched, whatever its slot held before.
_PROMPT_BLOCK = 64
# ContextShift looks for the new prompt's first tokens after the kept head (this many must
# match) and shifts only when at least _SHIFT_MIN_TOKENS line up; less is cheaper to redo.
_SHIFT_PROBE = 8
_SHIFT_MIN_TOKENS = 32
# KoboldCpp keeps at least this share of the context for the prompt: a max_length that would
# leave less is cut down to fit.
_MIN_PROMPT_SHARE = 0.2
_DEFAULT_BATCH = 512
# An upper bound on the characters of one token (vocabularies' longest pieces are runs of
# spaces or symbols well below this).
_MAX_TOKEN_CHARS = 128


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
        self._path = path
        self._piece = ctypes.create_string_buffer(_PIECE_BUFFER_BYTES)
        self._end_tokens = [
            t for t in range(self._n_vocab) if llama.llama_vocab_is_eog(self._vocab, t)
        ]
        self._slot_count = max(1, settings.parallelrequests)
        self._slot_context = int(llama.llama_n_ctx_seq(context))
        self._batch = llama.llama_batch_init(self._n_batch, 0, 1)
        self._slots = [_Slot(seq_id) for seq_id in range(self._slot_count)]
        # KoboldCpp's ContextShift; parallel requests turn it off, as there.
        self._context_shift = (
            not settings.noshift
            and self._slot_count == 1
            and bool(llama.llama_memory_can_shift(self._memory))
        )
        self._active: list[_Sequence] = []
        self._chat_template = ChatTemplate(
            self._metadata("tokenizer.chat_template"),
            self._metadata("general.architecture") or "",
            bos_token=self._token_bytes(llama.llama_vocab_bos(self._vocab), True).decode(),
            eos_token=self._token_bytes(llama.llama_vocab_eos(self._vocab), True).decode(),
        )
        self._threadpool: _Threadpool | None = None
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
        # Weight repacking picks a different matmul kernel for 4+ columns than for one, so a
        # sequence's logits would depend on how many others share its batch and the same seed
        # could give another text batched than alone. Batched serving goes without it (measured
        # here: no loss of speed on the bundled model); a single slot keeps it.
        model_params.use_extra_bufts = settings.parallelrequests <= 1
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
        # With parallel requests the context is shared out evenly among the slots, as
        # llama-server's -np does; each slot keeps its own KV cache (and so its own prefix).
        slots = max(1, settings.parallelrequests)
        context_params.n_seq_max = slots
        context_params.kv_unified = False
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
        threadpool = _Threadpool.attach(context, threads)
        logger.info(
            "Loaded %s: context %d tokens, %d threads, batch %d%s",
            path.name,
            settings.contextsize,
            threads,
            batch,
            f", {slots} parallel slots of {settings.contextsize // slots} tokens"
            " (ContextShift is off with parallel requests)"
            if slots > 1
            else "",
        )
        engine = cls(model, context, path, settings)
        engine._threadpool = threadpool
        return engine

    # -- Engine protocol -------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def context_size(self) -> int:
        return self._n_ctx

    @property
    def model_path(self) -> Path | None:
        return self._path

    @property
    def chat_template(self) -> ChatTemplate:
        return self._chat_template

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return self._tokenize(text, add_bos=self._add_bos, parse_special=special)

    def detokenize(self, ids: list[int], special: bool = True) -> str:
        bad = [i for i in ids if not 0 <= i < self._n_vocab]
        if bad:
            raise ValueError(f"token ids out of range 0..{self._n_vocab - 1}: {bad[:5]}")
        # Called from the event loop while the worker thread generates: its own buffer, never
        # the generation's (`self._piece`).
        buffer = ctypes.create_string_buffer(_PIECE_BUFFER_BYTES)
        pieces = b"".join(self._token_bytes(i, special, buffer) for i in ids)
        return pieces.decode("utf-8", errors="replace")

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return len(self._fit_to_context(request)[1])

    def check_json_schema(self, schema: dict[str, Any]) -> None:
        try:
            grammar = _schema_grammar(schema)
        except EngineError as exc:
            raise ValueError(str(exc)) from None
        assert grammar is not None
        sampler = llama.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        if not sampler:
            raise ValueError("llama.cpp rejected the grammar made from this JSON schema")
        llama.llama_sampler_free(sampler)

    @property
    def parallel_slots(self) -> int:
        return self._slot_count

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineEvent]:
        """One request on its own (the serial path; also grammar-bound requests)."""
        schema = request.json_schema
        decision = request.schema_decision_prompt
        if (
            schema is not None
            and decision is not None
            and not self._model_says_yes(decision, cancelled)
        ):
            schema = None
        sequence = self.start_sequence(request, cancelled, schema)
        while True:
            for owner, event in self.step():
                if owner is sequence:
                    yield event
                    if isinstance(event, GenerationOutcome):
                        return

    def start_sequence(
        self,
        request: GenerationRequest,
        cancelled: threading.Event,
        schema: dict[str, Any] | None = None,
    ) -> _Sequence:
        """Give a request a free slot (the one whose cache shares the longest prefix); it
        then advances with every `step()`. Returns the handle events are reported under."""
        started = time.perf_counter()
        max_tokens, prompt = self._fit_to_context(request)
        busy = {sequence.slot for sequence in self._active}
        free = [slot for slot in self._slots if slot not in busy]
        if not free:
            raise EngineError("no free slot for another sequence")
        slot = max(free, key=lambda candidate: _shared_prefix(candidate.cached, prompt))
        reused = self._prepare_slot(slot, prompt)
        sequence = _Sequence(
            request=request,
            cancelled=cancelled,
            slot=slot,
            prompt=prompt,
            max_tokens=max_tokens,
            reused=reused,
            decoded=reused,
            sampler=self._build_sampler(request.sampling, prompt, _schema_grammar(schema)),
            pipeline=TokenTextPipeline(request.stop, request.trim_stop),
            started=started,
            constrained=schema is not None,
        )
        self._active.append(sequence)
        return sequence

    def step(self) -> list[tuple[object, EngineEvent]]:
        """One decode for every active sequence: the next token of each generating sequence,
        and as much of waiting prompts as the batch has room for. Returns the events."""
        events: list[tuple[object, EngineEvent]] = []
        for sequence in [s for s in self._active if s.cancelled.is_set()]:
            self._finish(sequence, FinishReason.CANCELLED, events)
        batch, used = self._batch, 0
        added: list[tuple[_Sequence, list[int]]] = []
        for sequence in self._active:
            if sequence.next_token is not None and used < self._n_batch:
                self._put(used, sequence.next_token, len(sequence.slot.cached), sequence, True)
                sequence.logits_row = used
                added.append((sequence, [sequence.next_token]))
                used += 1
        for sequence in self._active:
            remaining = len(sequence.prompt) - sequence.decoded
            if sequence.next_token is not None or remaining <= 0 or used >= self._n_batch:
                continue
            end = min(sequence.decoded + self._n_batch - used, len(sequence.prompt))
            if self._slot_count > 1:
                # One aligned block per sequence per decode (see _PROMPT_BLOCK); a block that
                # does not fit waits for the next step rather than being cut differently.
                end = min(
                    (sequence.decoded // _PROMPT_BLOCK + 1) * _PROMPT_BLOCK, len(sequence.prompt)
                )
                if end - sequence.decoded > self._n_batch - used:
                    continue
            chunk = sequence.prompt[sequence.decoded : end]
            for offset, token in enumerate(chunk):
                completes = offset == len(chunk) - 1 and len(chunk) == remaining
                self._put(used, token, sequence.decoded + offset, sequence, completes)
                if completes:
                    sequence.logits_row = used
                used += 1
            sequence.decoded += len(chunk)
            added.append((sequence, chunk))
        if used == 0:
            return events
        batch.n_tokens = used
        status = llama.llama_decode(self._context, batch)
        if status != 0:
            for sequence, _ in added:
                self._forget_slot(sequence.slot)
                self._finish(
                    sequence,
                    FinishReason.ERROR,
                    events,
                    error=f"llama_decode failed with status {status}",
                )
            return events
        for sequence, tokens in added:
            sequence.slot.cached.extend(tokens)
        for sequence in [s for s in self._active if s.logits_row >= 0]:
            self._sample(sequence, events)
        return events

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            llama.llama_batch_free(self._batch)
            if self._threadpool is not None:
                self._threadpool.detach(self._context)
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

    def _token_bytes(self, token: int, special: bool, buffer: Any = None) -> bytes:
        """A token's bytes, read through `buffer` (default: the generation thread's own)."""
        piece = self._piece if buffer is None else buffer
        length = llama.llama_token_to_piece(
            self._vocab, token, piece, _PIECE_BUFFER_BYTES, 0, special
        )
        if length < 0:  # piece longer than the buffer (never seen in practice)
            bigger = ctypes.create_string_buffer(-length)
            length = llama.llama_token_to_piece(self._vocab, token, bigger, -length, 0, special)
            return bigger.raw[:length]
        return piece.raw[:length]

    def _fit_to_context(self, request: GenerationRequest) -> tuple[int, list[int]]:
        """Clamp max_tokens and trim the prompt's front so both fit; `memory` stays whole."""
        limit = self._slot_context
        if request.max_context_length is not None:
            limit = min(limit, request.max_context_length)
        max_tokens = min(request.max_tokens, int(limit * (1 - _MIN_PROMPT_SHARE)))
        max_tokens = max(max_tokens, 1)
        # BOS belongs to the kept head with `memory`: trimming must never cut it off.
        head = [int(llama.llama_vocab_bos(self._vocab))] if self._add_bos else []
        head += self._tokenize(request.memory, add_bos=False, parse_special=True)
        # Only the prompt's end can fit: tokenizing megabytes to keep a few thousand tokens
        # would cost seconds and memory for nothing. No token is longer than
        # _MAX_TOKEN_CHARS characters, so this tail still holds every token that fits.
        text = request.prompt[-limit * _MAX_TOKEN_CHARS :]
        prompt = self._tokenize(text, add_bos=False, parse_special=True)
        room = max(limit - max_tokens - len(head), 1)
        if len(prompt) > room:
            prompt = prompt[len(prompt) - room :]
        tokens = head + prompt
        if not tokens:  # an empty prompt still needs one token to predict from
            tokens = [int(llama.llama_vocab_bos(self._vocab))]
        return max_tokens, tokens[-limit:]

    def _prepare_slot(self, slot: _Slot, prompt: list[int]) -> int:
        """Drop what the slot caches beyond the shared prefix; return how many tokens stay."""
        keep = 0
        if self._reuse_prefix:
            # Always re-decode the prompt's last token: its logits start the reply.
            keep = min(_shared_prefix(slot.cached, prompt), len(prompt) - 1)
            if self._slot_count > 1:
                keep -= keep % _PROMPT_BLOCK  # reuse whole blocks only (see _PROMPT_BLOCK)
            elif self._context_shift:
                shifted = self._shift_context(slot, prompt, keep)
                if shifted is not None:
                    return shifted
        if keep < len(slot.cached) and not llama.llama_memory_seq_rm(
            self._memory, slot.seq_id, keep, -1
        ):
            self._forget_slot(slot)
            keep = 0
        del slot.cached[keep:]
        return keep

    def _shift_context(self, slot: _Slot, prompt: list[int], keep: int) -> int | None:
        """ContextShift: when the prompt is the cached one with a stretch after the shared head
        cut out (a chat that outgrew the context and was trimmed at the front), drop that
        stretch from the KV cache and move what follows back, instead of recomputing it.
        Returns the tokens now reusable, or None when the cache does not line up."""
        cached = slot.cached
        probe = prompt[keep : keep + _SHIFT_PROBE]
        if len(probe) < _SHIFT_PROBE or len(cached) - keep <= _SHIFT_PROBE:
            return None
        # Every offset where the probe fits is a candidate (repetitive text has several);
        # the one lining up the most tokens is the real cut.
        best = (0, 0)
        for offset in range(1, len(cached) - keep - _SHIFT_PROBE + 1):
            if cached[keep + offset : keep + offset + _SHIFT_PROBE] == probe:
                length = _shared_prefix(cached[keep + offset :], prompt[keep:])
                best = max(best, (length, offset))
        moved, dropped = min(best[0], len(prompt) - 1 - keep), best[1]
        if moved < _SHIFT_MIN_TOKENS:
            return None
        start, end = keep + dropped, keep + dropped + moved
        memory, seq_id = self._memory, slot.seq_id
        if not (
            llama.llama_memory_seq_rm(memory, seq_id, end, -1)
            and llama.llama_memory_seq_rm(memory, seq_id, keep, start)
        ):
            self._forget_slot(slot)
            return 0
        llama.llama_memory_seq_add(memory, seq_id, start, end, -dropped)
        slot.cached = cached[:keep] + cached[start:end]
        logger.info("ContextShift: kept %d cached tokens, dropped %d", keep + moved, dropped)
        return keep + moved

    def _forget_slot(self, slot: _Slot) -> None:
        llama.llama_memory_seq_rm(self._memory, slot.seq_id, -1, -1)  # never fails
        slot.cached.clear()

    def _put(self, row: int, token: int, position: int, sequence: _Sequence, logits: bool) -> None:
        batch = self._batch
        batch.token[row] = token
        batch.pos[row] = position
        batch.n_seq_id[row] = 1
        batch.seq_id[row][0] = sequence.slot.seq_id
        batch.logits[row] = logits

    def _sample(self, sequence: _Sequence, events: list[tuple[object, EngineEvent]]) -> None:
        row, sequence.logits_row = sequence.logits_row, -1
        now = time.perf_counter()
        if sequence.prompt_done is None:
            sequence.prompt_done = now
        token = llama.llama_sampler_sample(sequence.sampler, self._context, row)
        sequence.next_token = None
        if llama.llama_vocab_is_eog(self._vocab, token):
            self._finish(sequence, FinishReason.STOP, events)
            return
        sequence.generated += 1
        text, stop = sequence.pipeline.push(self._token_bytes(token, special=False))
        if text:
            sequence.first_text_at = sequence.first_text_at or now
            events.append((sequence, TokenEvent(text)))
        if stop is not None:
            self._finish(sequence, FinishReason.STOP, events, stop_sequence=stop)
        elif sequence.generated >= sequence.max_tokens:
            self._finish(sequence, FinishReason.LENGTH, events)
        elif len(sequence.slot.cached) >= self._slot_context:
            self._finish(sequence, FinishReason.LENGTH, events)  # the slot's context is full
        else:
            sequence.next_token = token

    def _finish(
        self,
        sequence: _Sequence,
        reason: FinishReason,
        events: list[tuple[object, EngineEvent]],
        *,
        stop_sequence: str | None = None,
        error: str | None = None,
    ) -> None:
        self._active.remove(sequence)
        llama.llama_sampler_free(sequence.sampler)
        if stop_sequence is None and reason is not FinishReason.ERROR:
            rest = sequence.pipeline.finish()
            if rest:
                sequence.first_text_at = sequence.first_text_at or time.perf_counter()
                events.append((sequence, TokenEvent(rest)))
        finished = time.perf_counter()
        prompt_done = sequence.prompt_done or finished
        first = sequence.first_text_at
        events.append(
            (
                sequence,
                GenerationOutcome(
                    reason,
                    prompt_tokens=len(sequence.prompt),
                    completion_tokens=sequence.generated,
                    prompt_seconds=prompt_done - sequence.started,
                    generation_seconds=finished - prompt_done,
                    time_to_first_token=None if first is None else first - sequence.started,
                    seed=sequence.request.sampling.seed,
                    stop_sequence=stop_sequence,
                    error=error,
                    reused_prompt_tokens=sequence.reused,
                    constrained=sequence.constrained,
                ),
            )
        )

    def _model_says_yes(self, question_prompt: str, cancelled: threading.Event) -> bool:
        """A hidden, grammar-bound yes/no answer (greedy), e.g. "does this need a tool?"."""
        request = GenerationRequest(
            "decision", question_prompt, max_tokens=1, sampling=SamplingParams(temperature=0.0)
        )
        sequence = self.start_sequence(request, cancelled)
        llama.llama_sampler_free(sequence.sampler)
        sequence.sampler = self._build_sampler(request.sampling, [], _YES_NO_GRAMMAR)
        answer = ""
        while self._active:
            for _, event in self.step():
                if isinstance(event, TokenEvent):
                    answer += event.text
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
        penalties = None
        if sampling.rep_pen != 1.0 or sampling.presence_penalty != 0.0:
            last_n = sampling.rep_pen_range if sampling.rep_pen_range > 0 else self._n_ctx
            penalties = llama.llama_sampler_init_penalties(
                self._n_vocab, last_n, sampling.rep_pen, 0.0, sampling.presence_penalty
            )
            add(chain, penalties)
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
        if penalties is not None:
            # Repetition penalty looks back over the prompt too, as in KoboldCpp. Only the
            # penalties sampler sees the prompt: a grammar fed tokens it does not allow throws
            # a C++ exception, which ends the whole process.
            for token in prompt[-(sampling.rep_pen_range or len(prompt)) :]:
                llama.llama_sampler_accept(penalties, token)
        return chain


@dataclass(eq=False)
class _Slot:
    """One sequence of the KV cache and the tokens it holds."""

    seq_id: int
    cached: list[int] = field(default_factory=list)


@dataclass(eq=False)
class _Sequence:
    """A request being generated in a slot."""

    request: GenerationRequest
    cancelled: threading.Event
    slot: _Slot
    prompt: list[int]
    max_tokens: int
    reused: int
    decoded: int  # prompt tokens in the slot's cache so far
    sampler: Any
    pipeline: TokenTextPipeline
    started: float
    constrained: bool
    generated: int = 0
    next_token: int | None = None  # sampled, decoded in the next step
    logits_row: int = -1  # the batch row whose logits this sequence samples from
    prompt_done: float | None = None
    first_text_at: float | None = None


def _shared_prefix(first: list[int], second: list[int]) -> int:
    length = min(len(first), len(second))
    index = 0
    while index < length and first[index] == second[index]:
        index += 1
    return index


# One token is enough: " yes"/" no" style pieces are single tokens in every common vocabulary.
_YES_NO_GRAMMAR = 'root ::= "yes" | "no" | "Yes" | "No"'


def _schema_grammar(schema: dict[str, Any] | None) -> str | None:
    if schema is None:
        return None
    try:
        return str(json_schema_to_gbnf(json.dumps(schema)))
    except Exception as exc:  # the converter raises assorted errors on unsupported schemas
        raise EngineError(f"cannot turn this JSON schema into a grammar: {exc}") from exc


class _GgmlThreadpoolParams(ctypes.Structure):
    """`struct ggml_threadpool_params` (ggml.h); llama-cpp-python does not bind it."""

    _fields_ = [
        ("cpumask", ctypes.c_bool * 512),  # GGML_MAX_N_THREADS
        ("n_threads", ctypes.c_int),
        ("prio", ctypes.c_int),
        ("poll", ctypes.c_uint32),
        ("strict_cpu", ctypes.c_bool),
        ("paused", ctypes.c_bool),
    ]


class _Threadpool:
    """A persistent ggml thread pool attached to the context, as llama-server does.

    Without one, ggml creates and joins a new pool for every decode (so per token), and its
    threads never get to spin-wait between graph nodes. Measured on the bundled model: this is
    where Hearth lost ~10% of decode speed and prompt speed to llama-server. When the
    libraries cannot be bound (another platform's file names), decoding still works, slower.
    """

    _POLL = 50  # ggml's default hybrid polling, as llama-server uses

    def __init__(self, pool: int, free: Any) -> None:
        self._pool = pool
        self._free = free

    @classmethod
    def attach(cls, context: Any, threads: int) -> _Threadpool | None:
        try:
            cpu = ctypes.CDLL(str(_shared_library("ggml-cpu")))
            new, free = cpu.ggml_threadpool_new, cpu.ggml_threadpool_free
            new.argtypes, new.restype = [ctypes.POINTER(_GgmlThreadpoolParams)], ctypes.c_void_p
            free.argtypes, free.restype = [ctypes.c_void_p], None
            attach = _libllama().llama_attach_threadpool
            attach.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            attach.restype = None
        except (OSError, AttributeError, KeyError):
            logger.info("No persistent thread pool on this platform; decoding is slower.")
            return None
        params = _GgmlThreadpoolParams(n_threads=threads, prio=0, poll=cls._POLL)
        pool = new(ctypes.byref(params))
        if not pool:
            return None
        attach(context, pool, pool)
        return cls(pool, free)

    def detach(self, context: Any) -> None:
        detach = _libllama().llama_detach_threadpool
        detach.argtypes, detach.restype = [ctypes.c_void_p], None
        detach(context)
        self._free(self._pool)


def _libllama() -> Any:
    """llama-cpp-python's handle on libllama, for the functions it does not bind."""
    import llama_cpp.llama_cpp as bindings

    return vars(bindings)["_lib"]


def _shared_library(stem: str) -> Path:
    """The file of ggml library `stem` that this process already uses.

    llama-cpp-python ships each library as separate copies (`libggml-cpu.so`, `.so.0`,
    `.so.0.25.3`), and libllama pulled in the one named by its SONAME (`.so.0`). Opening another
    copy would map the library twice, with its own globals (a second device registry once GPU or
    RPC backends are registered): so the copy already mapped is taken, then the SONAME one.
    """
    loaded = _mapped_library(stem)
    if loaded is not None:
        return loaded
    folder = Path(llama.__file__).resolve().parent / "lib"
    for pattern in (f"lib{stem}.so.[0-9]", f"lib{stem}.so", f"lib{stem}.dylib", f"{stem}.dll"):
        found = sorted(folder.glob(pattern))
        if found:
            return found[0]
    raise OSError(f"{stem} not found in {folder}")


def _mapped_library(stem: str) -> Path | None:
    """The file of `lib<stem>` mapped into this process (Linux; None elsewhere)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith(f"lib{stem}.so"):
            return Path(fields[5])
    return None


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
