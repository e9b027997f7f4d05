"""A loaded GGUF with its context: loading, the tokenizer, metadata, fitting a prompt."""

from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import llama_cpp as llama

from server.core.llama.loading.devices import plan_placement
from server.core.llama.loading.infill import FimTokens, InfillRoom, infill_tokens
from server.core.llama.loading.load_options import (
    LOAD_MODES,
    ModelOverrides,
    apply_context_options,
    kv_layout,
    model_overrides,
)
from server.core.llama.loading.lora import LoraAdapters
from server.core.llama.loading.native import ProgressReporter, Threadpool, quiet_llama_logs
from server.core.load_settings import LoadSettings, ModelOptions, TemplateChoice
from server.core.scheduling.engine import ContextOverflow, EngineError
from server.core.templates.chat import ChatTemplate, ChatTemplateError
from server.core.types import GenerationRequest, InfillParts
from server.devices.backends import gpu_backends
from server.devices.placement import Placement

logger = logging.getLogger(__name__)

_PIECE_BUFFER_BYTES = 256
# KoboldCpp keeps at least this share of the context for the prompt: a max_length that would
# leave less is cut down to fit.
_MIN_PROMPT_SHARE = 0.2
# An upper bound on the characters of one token (vocabularies' longest pieces are runs of
# spaces or symbols well below this).
_MAX_TOKEN_CHARS = 128


def _model_params(
    settings: LoadSettings, gpu_layers: int, progress: Any, overrides: ModelOverrides
) -> Any:
    params = llama.llama_model_default_params()
    params.n_gpu_layers = gpu_layers
    params.load_mode = LOAD_MODES[settings.options.load_mode]  # mmap, mlock (--usemmap, …)
    overrides.apply(params)  # --overridekv, --moeexperts; --overridetensors, --moecpu
    # Weight repacking picks a different matmul kernel for 4+ columns than for one, so a
    # sequence's logits would depend on how many others share its batch and the same seed
    # could give another text batched than alone. Batched serving goes without it (measured
    # here: no loss of speed on the bundled model); a single slot keeps it.
    params.use_extra_bufts = settings.parallelrequests <= 1
    params.progress_callback = progress
    if settings.tensor_split:
        # The struct keeps the array alive (ctypes holds it in the params' _objects).
        shares = settings.tensor_split[: llama.LLAMA_MAX_DEVICES]
        params.tensor_split = (ctypes.c_float * llama.LLAMA_MAX_DEVICES)(*shares)
    return params


def _context_params(settings: LoadSettings) -> Any:
    batch = settings.batch_size
    params = llama.llama_context_default_params()
    params.n_ctx = settings.contextsize
    params.n_batch = batch
    params.n_ubatch = batch
    # With parallel requests the context is shared out evenly among the slots, as
    # llama-server's -np does; each slot keeps its own KV cache (and so its own prefix).
    params.n_seq_max = max(1, settings.parallelrequests)
    params.kv_unified = False
    params.n_threads = settings.thread_count
    params.n_threads_batch = settings.thread_count
    params.no_perf = True
    # Sliding-window layers (Gemma 3) normally keep only the window, which makes a partial
    # cache removal impossible and so defeats prefix reuse; the full-size cache allows it.
    params.swa_full = True
    params.n_outputs_max = most_outputs(settings)
    # Flash attention, the KV cache's types and place (--quantkv, --lowvram), RoPE.
    apply_context_options(params, settings.options, kv_layout(settings.options)[0])
    return params


def most_outputs(settings: LoadSettings) -> int:
    """The most rows of logits one decode asks for: each slot's next token and its longest
    draft (a prompt's chunk wants its last row only). llama.cpp would otherwise size its
    output buffer for a whole batch: 512 rows x 262,144 tokens x 4 bytes on the bundled
    model, 430 MiB of compute buffer more than needed (measured: bench/kv_memory.py)."""
    spec = settings.speculation
    longest = {
        "ngram-simple": spec.ngram_size_m,
        "ngram-mod": spec.mod_n_max,
    }.get(spec.kind, 0)
    if spec.draft_model:
        longest = spec.draft_max
    slots = max(1, settings.parallelrequests)
    return max(1, min(settings.batch_size, slots * (1 + longest)))


def _say_what_changes(path: Path, options: ModelOptions, overrides: ModelOverrides) -> None:
    """One line for each option this model does not take as asked."""
    _kv, note = kv_layout(options)
    for line in [*([note] if note else []), *overrides.notes]:
        logger.warning("%s: %s.", path.name, line)


def _context_failure(path: Path, settings: LoadSettings) -> str:
    message = f"{path}: could not create a context of {settings.contextsize}"
    kv, _note = kv_layout(settings.options)
    if (kv.type_k, kv.type_v) != ("f16", "f16"):
        message += (
            f" with a {kv.type_k}/{kv.type_v} KV cache (a quantized V cache needs flash "
            "attention, which this device may lack; some models need K and V of one type; "
            "a head size must divide by the type's block size): try --quantkv f16"
        )
    return message


class Vocabulary:
    """A GGUF's tokenizer, metadata and chat template, from a model handle llama.cpp loaded.

    `load_vocab_only` reads just these (no weights, no context): what a request for a model
    that is not loaded needs to be planned (issue 12's switching)."""

    def __init__(self, model: Any, path: Path, template: TemplateChoice | None = None) -> None:
        self.model = model
        self.path = path
        # One slot's context: what a prompt is fitted to (LoadedModel: from its context;
        # a vocab-only card: from the settings).
        self.slot_context = 0
        self.vocab = llama.llama_model_get_vocab(model)
        self.n_vocab = int(llama.llama_vocab_n_tokens(self.vocab))
        self.add_bos = bool(llama.llama_vocab_get_add_bos(self.vocab))
        self.gen_limit = 0  # --genlimit: the most tokens a request generates (0: no limit)
        self.bos = int(llama.llama_vocab_bos(self.vocab))
        self._piece = ctypes.create_string_buffer(_PIECE_BUFFER_BYTES)
        self.chat_template = self._chat_template(template or TemplateChoice())

    def _chat_template(self, choice: TemplateChoice) -> ChatTemplate:
        """The user's template when chosen (checked at start), else the model's own; a model
        template that does not compile is said once and the built-in turn format used, so the
        model still serves (plain completions need no template at all)."""
        source = choice.source or self.metadata("tokenizer.chat_template")

        def template(jinja: str | None) -> ChatTemplate:
            return ChatTemplate(
                jinja,
                self.metadata("general.architecture") or "",
                bos_token=self.token_bytes(self.bos, True).decode(),
                eos_token=self.token_bytes(int(llama.llama_vocab_eos(self.vocab)), True).decode(),
                origin=choice.origin,
                kwargs=choice.kwargs,
            )

        try:
            return template(source)
        except ChatTemplateError as exc:
            if choice.source:
                raise EngineError(f"the chat template ({choice.origin}): {exc}") from None
            fallback = template(None)
            logger.warning(
                "Chat template: %s's own does not compile (%s); using %s instead.",
                self.path.name,
                exc,
                fallback.origin,
            )
            return fallback

    @classmethod
    def load_vocab_only(
        cls, path: Path, template: TemplateChoice | None = None, options: ModelOptions | None = None
    ) -> Vocabulary:
        """`options`: the metadata overrides, --nobostoken and --genlimit, so the card plans
        and counts as the loaded model does (tensor placements mean nothing here)."""
        options = options or ModelOptions()
        quiet_llama_logs()
        llama.llama_backend_init()
        params = llama.llama_model_default_params()
        params.vocab_only = True
        overrides = model_overrides(path, replace(options, tensor_overrides=(), moe_cpu_layers=0))
        overrides.apply(params)
        model = llama.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise EngineError(f"{path}: llama.cpp could not read this model's vocabulary")
        try:
            vocabulary = cls(model, path, template)
            vocabulary.add_bos = vocabulary.add_bos and options.add_bos
            vocabulary.gen_limit = options.gen_limit
            return vocabulary
        except EngineError:
            llama.llama_model_free(model)
            raise

    def free_vocabulary(self) -> None:
        """Frees a vocab-only model (a LoadedModel frees its model in `close`)."""
        llama.llama_model_free(self.model)

    # -- tokenizer -------------------------------------------------------------------------

    def metadata(self, key: str) -> str | None:
        size = llama.llama_model_meta_val_str(self.model, key.encode(), None, 0)
        if size < 0:
            return None
        buffer = ctypes.create_string_buffer(size + 1)
        llama.llama_model_meta_val_str(self.model, key.encode(), buffer, size + 1)
        return buffer.value.decode("utf-8", errors="replace")

    def tokenize(self, text: str, *, add_bos: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buffer = (llama.llama_token * capacity)()
        count = llama.llama_tokenize(
            self.vocab, data, len(data), buffer, capacity, add_bos, parse_special
        )
        if count < 0:  # buffer too small: llama.cpp says how many it needs
            capacity = -count
            buffer = (llama.llama_token * capacity)()
            count = llama.llama_tokenize(
                self.vocab, data, len(data), buffer, capacity, add_bos, parse_special
            )
        return list(buffer[:count])

    def detokenize(self, ids: list[int], special: bool) -> str:
        bad = [i for i in ids if not 0 <= i < self.n_vocab]
        if bad:
            raise ValueError(f"token ids out of range 0..{self.n_vocab - 1}: {bad[:5]}")
        # Called from the event loop while the worker thread generates: its own buffer, never
        # the generation's (`self._piece`).
        buffer = ctypes.create_string_buffer(_PIECE_BUFFER_BYTES)
        pieces = b"".join(self.token_bytes(i, special, buffer) for i in ids)
        return pieces.decode("utf-8", errors="replace")

    def token_bytes(self, token: int, special: bool, buffer: Any = None) -> bytes:
        """A token's bytes, read through `buffer` (default: the generation thread's own)."""
        piece = self._piece if buffer is None else buffer
        length = llama.llama_token_to_piece(
            self.vocab, token, piece, _PIECE_BUFFER_BYTES, 0, special
        )
        if length < 0:  # piece longer than the buffer (never seen in practice)
            bigger = ctypes.create_string_buffer(-length)
            length = llama.llama_token_to_piece(self.vocab, token, bigger, -length, 0, special)
            return bigger.raw[:length]
        return piece.raw[:length]

    def is_end(self, token: int) -> bool:
        return bool(llama.llama_vocab_is_eog(self.vocab, token))

    def missing_fim_tokens(self) -> list[str]:
        """The fill-in-the-middle roles (prefix, suffix, middle) this model has no token for."""
        return FimTokens.of(self.vocab).missing()

    def infill_prompt(self, parts: InfillParts, batch: int, generate: int, spm: bool) -> list[int]:
        """llama-server's /infill prompt for one slot (server/core/llama/loading/infill.py)."""
        return infill_tokens(self, parts, InfillRoom(batch, self.slot_context, generate), spm=spm)

    def fit_to_context(self, request: GenerationRequest) -> tuple[int, list[int]]:
        """Clamp max_tokens and trim the prompt's front so both fit one slot; `memory` stays
        whole. Returns (max_tokens, prompt tokens)."""
        max_tokens, tokens, _trimmed = self.fit(request)
        return max_tokens, tokens

    def budget(self, request: GenerationRequest) -> tuple[int, int]:
        """The request's context (its own limit, or a slot's) and the tokens it may generate
        in it (its max_tokens, --genlimit, and at least a share left for the prompt)."""
        limit = self.slot_context
        if request.max_context_length is not None:
            limit = min(limit, request.max_context_length)
        max_tokens = request.max_tokens
        if self.gen_limit > 0:  # whatever the request asked (KoboldCpp's --genlimit)
            max_tokens = min(max_tokens, self.gen_limit)
        return limit, max(min(max_tokens, int(limit * (1 - _MIN_PROMPT_SHARE))), 1)

    def fit(self, request: GenerationRequest) -> tuple[int, list[int], bool]:
        """`fit_to_context`, also saying whether the prompt had to be trimmed."""
        limit, max_tokens = self.budget(request)
        # BOS belongs to the kept head with `memory`: trimming must never cut it off.
        head = [self.bos] if self.add_bos else []
        head += self.tokenize(request.memory, add_bos=False, parse_special=True)
        if request.refuse_overflow:
            return self._fit_or_refuse(request, head, limit, max_tokens)
        # Only the prompt's end can fit: tokenizing megabytes to keep a few thousand tokens
        # would cost seconds and memory for nothing. No token is longer than
        # _MAX_TOKEN_CHARS characters, so this tail still holds every token that fits.
        text = request.prompt
        if request.prompt_tokens:
            head = head if request.memory else []  # token prompts carry their own BOS
            prompt = list(request.prompt_tokens)
        else:
            text = request.prompt[-limit * _MAX_TOKEN_CHARS :]
            prompt = self.tokenize(text, add_bos=False, parse_special=True)
        room = max(limit - max_tokens - len(head), 1)
        trimmed = len(prompt) > room or len(text) < len(request.prompt)
        if len(prompt) > room:
            prompt = prompt[len(prompt) - room :]
        tokens = head + prompt or [self.bos]  # an empty prompt still needs a token to start
        return max_tokens, tokens[-limit:], trimmed or len(tokens) > limit

    def _fit_or_refuse(
        self, request: GenerationRequest, head: list[int], limit: int, max_tokens: int
    ) -> tuple[int, list[int], bool]:
        """The whole prompt, with what is left of the context to generate in (llama-server's
        way: the reply stops at the context's end); ContextOverflow when the prompt alone
        fills it."""
        if request.prompt_tokens:
            prompt = list(request.prompt_tokens)
            head = head if request.memory else []
        else:
            prompt = self.tokenize(request.prompt, add_bos=False, parse_special=True)
        tokens = head + prompt or [self.bos]
        if len(tokens) >= limit:
            raise ContextOverflow(len(tokens), limit)
        return min(max_tokens, limit - len(tokens)), tokens, False


class LoadedModel(Vocabulary):
    """The model, its context and vocabulary; freed once by `close()`."""

    def __init__(
        self,
        model: Any,
        context: Any,
        path: Path,
        threadpool: Threadpool | None,
        placement: Placement,
        template: TemplateChoice | None = None,
    ) -> None:
        super().__init__(model, path, template)
        self.placement = placement
        self.context = context
        self.memory = llama.llama_get_memory(context)
        self.n_ctx = int(llama.llama_n_ctx(context))
        self.slot_context = int(llama.llama_n_ctx_seq(context))
        self.end_tokens = [
            t for t in range(self.n_vocab) if llama.llama_vocab_is_eog(self.vocab, t)
        ]
        self.can_shift = bool(llama.llama_memory_can_shift(self.memory))
        self.threadpool = threadpool
        self.adapters = LoraAdapters(context)  # none until `load` loads --lora's
        self._closed = False
        self._close_lock = threading.Lock()

    @classmethod
    def load(cls, path: Path, settings: LoadSettings) -> LoadedModel:
        """Load the model and create its context, logging progress in steps of 10%."""
        quiet_llama_logs()
        placement = plan_placement(settings, path, gpu_backends())
        # Checked before anything loads; kept alive until llama.cpp has read them.
        overrides = model_overrides(path, settings.options)
        _say_what_changes(path, settings.options, overrides)
        llama.llama_backend_init()
        callback = llama.llama_progress_callback(ProgressReporter(path.name))
        params = _model_params(settings, placement.gpu_layers, callback, overrides)
        model = llama.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise EngineError(f"{path}: llama.cpp could not load this model file{overrides.hint}")
        context = llama.llama_init_from_model(model, _context_params(settings))
        if not context:
            llama.llama_model_free(model)
            raise EngineError(_context_failure(path, settings))
        threadpool = Threadpool.attach(context, settings.thread_count)
        try:
            loaded = cls(model, context, path, threadpool, placement, settings.template)
            loaded.add_bos = loaded.add_bos and settings.options.add_bos  # --nobostoken
            loaded.gen_limit = settings.options.gen_limit
            loaded.adapters = LoraAdapters.load(model, context, path, settings.options.lora)
            return loaded
        except EngineError:  # the chosen template does not compile, or a LoRA does not fit
            if threadpool is not None:
                threadpool.detach(context)
            llama.llama_free(context)
            llama.llama_model_free(model)
            raise

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            if self.threadpool is not None:
                self.threadpool.detach(self.context)
            llama.llama_free(self.context)
            self.adapters.free()  # before the model, which would free them too
            llama.llama_model_free(self.model)
