"""LlamaCppEngine: requests in, token events out, one `llama_decode` per step for all of them.

It drives llama.cpp's low-level API directly (`llama_decode` and llama.cpp's own sampler chain)
instead of llama-cpp-python's high-level `Llama` class: measured on the bundled model with 2
threads that is ~79 tokens/s against ~67, because sampling stays in C and Python does only a
handful of ctypes calls per token. The KV cache of the previous request is kept; a new prompt
that starts with the same tokens only decodes what differs ("fast forwarding" in KoboldCpp).
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import llama_cpp as llama

from server.core.caching.prompt_cache import MIB, PromptCache, PromptCacheStats
from server.core.caching.state_store import StateStore
from server.core.llama.card import ModelCard
from server.core.llama.companions import Companions, load_model
from server.core.llama.embedding.embedder import Embedder
from server.core.llama.loading.model import LoadedModel
from server.core.llama.sampling.drawing import draw
from server.core.llama.sampling.sampler import (
    YES_NO_GRAMMAR,
    SamplerFactory,
    plain_greedy,
    schema_grammar,
)
from server.core.llama.sequences.batch import Batch
from server.core.llama.sequences.decisions import Decisions, question_for
from server.core.llama.sequences.sequence import Sequence, joined_text
from server.core.llama.sequences.slot_states import SlotStates, kobold_state_slots
from server.core.llama.sequences.slots import SlotCache, disk_states
from server.core.llama.sequences.thinking import thought_budget
from server.core.llama.speculation.draft_model import engine_speculators
from server.core.load_settings import LoadSettings
from server.core.scheduling.counters import DecodeCounts
from server.core.scheduling.engine import EngineError
from server.core.templates.chat import ChatTemplate
from server.core.text.loops import LoopWatch
from server.core.text.text_stream import TokenTextPipeline
from server.core.types import (
    EngineReport,
    FinishReason,
    GenerationOutcome,
    GenerationRequest,
    SlotAction,
    SlotActionEvent,
)
from server.devices.placement import Placement
from server.models.files import model_display_name

logger = logging.getLogger(__name__)
Events = list[tuple[object, EngineReport]]


class LlamaCppEngine:
    """One loaded GGUF with one context; generation runs on the scheduler's worker thread."""

    def __init__(
        self, loaded: LoadedModel, settings: LoadSettings, companions: Companions | None = None
    ) -> None:
        self._loaded = loaded
        self._card = ModelCard(loaded)  # the Tokenizer and SchemaChecker sides
        self._name = model_display_name(loaded.path)
        self.decode_counts = DecodeCounts()  # for /metrics (server/core/engine.CountsDecodes)
        self.prompt_cache = PromptCache(settings.cacheram_mib * MIB, settings.smartcache)
        self._store = store = StateStore(self.prompt_cache, disk_states(loaded, settings))
        self._slots = SlotCache(
            loaded.context,
            max(1, settings.parallelrequests),
            reuse_prefix=not settings.nofastforward,
            context_shift=not settings.noshift and loaded.can_shift,
            saved=store,
            private=settings.privatecache,
        )
        self._slot_states = SlotStates(
            self._slots,
            loaded.context,
            loaded.n_vocab,
            loaded.slot_context,
            kobold_state_slots(settings.smartcache),
        )
        self.end_tokens = ends = tuple(loaded.end_tokens)  # EOG set: llama-server's ignore_eos
        self._samplers = SamplerFactory(loaded.vocab, loaded.n_vocab, loaded.n_ctx, list(ends))
        self._batch = Batch(settings.batch_size, blocked=self._slots.blocked)
        self._piece_buffer = ctypes.create_string_buffer(256)
        self._active: list[Sequence] = []
        self._decisions = Decisions()  # hidden tool decisions in flight
        self._settings = settings
        # The draft model and the projector, closed with the engine.
        self._companions = companions = companions or Companions()
        self._speculators = engine_speculators(loaded, settings.speculation, companions.draft)
        self._embedder: Embedder | None = None  # created by the first embedding request
        self._closed = False

    @classmethod
    def load(cls, path: Path, settings: LoadSettings) -> LlamaCppEngine:
        """The model and what loads beside it (its draft model, its projector)."""
        loaded, companions = load_model(path, settings)
        return cls(loaded, settings, companions)

    # -- Engine protocol -------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def context_size(self) -> int:
        return self._loaded.n_ctx

    @property
    def model_path(self) -> Path | None:
        return self._loaded.path

    @property
    def chat_template(self) -> ChatTemplate:
        return self._loaded.chat_template

    @property
    def placement(self) -> Placement:
        return self._loaded.placement

    @property
    def modalities(self) -> frozenset[str]:
        """What the model takes besides text ("vision", "audio"): from its projector."""
        return self._companions.modalities

    @property
    def parallel_slots(self) -> int:
        return len(self._slots.slots)

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return self._card.tokenize(text, special)

    def detokenize(self, ids: list[int], special: bool = True) -> str:
        return self._card.detokenize(ids, special)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return self._card.count_prompt_tokens(request)

    def check_json_schema(self, schema: dict[str, Any]) -> None:
        self._card.check_json_schema(schema)

    def check_grammar(self, grammar: str) -> None:
        self._card.check_grammar(grammar)

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineReport]:
        """One request on its own (the serial path; also embedding requests)."""
        if request.embed_inputs:
            yield from self._embeddings().embed(request, cancelled)
            return
        sequence = self.start_sequence(request, cancelled)
        while True:
            for owner, event in self.step():
                if owner is sequence:
                    yield event
                    if isinstance(event, GenerationOutcome):
                        return

    def slot_action(self, action: SlotAction, owner: str) -> SlotActionEvent:
        """A slot's KV state saved, restored or erased (server/core/engine.KeepsSlots)."""
        return self._slot_states.run(action, owner)

    def slot_tokens(self) -> list[int]:
        return [len(slot.cached) for slot in self._slots.slots]

    def prompt_cache_stats(self) -> PromptCacheStats:
        """The prompt cache in memory and on disk (server/core/engine.CachesPrompts)."""
        stats, disk = self.prompt_cache.stats(), self._store.disk_stats()
        if disk is None:
            return stats
        return replace(
            stats, disk_states=disk.files, disk_bytes=disk.bytes, disk_max_bytes=disk.max_bytes
        )

    def start_sequence(self, request: GenerationRequest, cancelled: threading.Event) -> object:
        """Give a request a free slot (the one whose cache shares the longest prefix); it
        then advances with every `step()`. Returns the handle events are reported under. With
        a decision to make ("auto" tool choice), the hidden question goes first (decisions.py)."""
        if request.json_schema is None or request.schema_decision_prompt is None:
            return self._start(request, cancelled, request.json_schema)
        if request.refuse_overflow and not request.media:
            # Refused now if the reply cannot fit, as without a question (ContextOverflow):
            # the question is trimmed to fit and would not tell.
            self._loaded.fit(request)
        question = question_for(request)
        sequence = self._start(question, cancelled, None)
        llama.llama_sampler_free(sequence.sampler)
        sequence.sampler = self._samplers.build(question.sampling, [], YES_NO_GRAMMAR)
        sequence.greedy = False  # the grammar decides now
        self._decisions.asking(sequence, request, cancelled)
        return sequence

    def _start(
        self, request: GenerationRequest, cancelled: threading.Event, schema: dict[str, Any] | None
    ) -> Sequence:
        """A sequence of `request` in a free slot, bound to `schema` (or its grammar)."""
        started = time.perf_counter()
        request = self._loaded.adapters.resolved(request)  # the LoRA scales it runs at
        max_tokens, prompt, truncated, media = self._companions.fit(self._loaded, request)
        owner, lora = request.cache_owner, self._loaded.adapters.cache_key(request)
        slot = self._slots.best_free({s.slot for s in self._active}, prompt, owner, lora)
        if slot is None:
            raise EngineError("no free slot for another sequence")
        reused = self._slots.prepare(slot, prompt, owner, request.reuse_cache, lora)
        if media is not None and media.whole_items(reused) < reused:  # never half an image
            reused = self._slots.cut(slot, media.whole_items(reused))
        grammar = schema_grammar(schema) if schema is not None else request.grammar
        known = prompt if media is None else [token for token in prompt if token >= 0]
        sampler = self._samplers.build(request.sampling, known, grammar)
        loaded = self._loaded
        sequence = Sequence(
            request=request,
            cancelled=cancelled,
            slot=slot,
            prompt=prompt,
            max_tokens=max_tokens,
            reused=reused,
            decoded=reused,
            sampler=sampler,
            # A schema-bound reply ends where its JSON does: a stop string would cut it.
            pipeline=TokenTextPipeline(
                () if schema is not None else request.stop, request.trim_stop
            ),
            started=started,
            constrained=schema is not None,
            greedy=plain_greedy(request.sampling, grammar),
            truncated=truncated,
            thought=thought_budget(
                request,
                lambda text: loaded.tokenize(text, add_bos=False, parse_special=True),
                sampler,
            ),
            speculator=None if self._speculators is None else self._speculators(slot.seq_id),
            media=media,
            loops=LoopWatch() if request.cut_loops and schema is not None else None,
        )
        self._active.append(sequence)
        return sequence

    def step(self) -> Events:
        """One decode for every active sequence: the next token of each generating sequence,
        and as much of waiting prompts as the batch has room for. Returns the events, each
        under its request's handle."""
        return self._decisions.relabel(self._step(), self._start)

    def _step(self) -> Events:
        events: Events = []
        for sequence in [s for s in self._active if s.cancelled.is_set()]:
            self._finish(sequence, FinishReason.CANCELLED, events)
        for sequence in self._companions.read_media(self._active, self._loaded.context):
            self._slots.forget(sequence.slot)
            self._finish(sequence, FinishReason.ERROR, events, error="reading an image failed")
        # One LoRA configuration per decode: the others wait their turn (lora.py).
        batched = self._loaded.adapters.turn(self._active)
        added, used = self._batch.fill(batched, self._loaded.slot_context)
        if used == 0:
            self._companions.wait_for_media(self._active)  # an image still being encoded
            return events

        # A prompt's first decode: first say how much of it came from the cache, so that a
        # client hears at once (llama-server's first `prompt_progress`).
        for sequence, tokens in added:
            if sequence.generated == 0 and sequence.decoded - len(tokens) == sequence.reused:
                events.append((sequence, sequence.progress(sequence.reused)))
        status = llama.llama_decode(self._loaded.context, self._batch.batch)
        if status != 0:
            for sequence, _ in added:
                self._slots.forget(sequence.slot)
                error = f"llama_decode failed with status {status}"
                self._finish(sequence, FinishReason.ERROR, events, error=error)
            return events
        self.decode_counts.record(len(self._active))
        for sequence, tokens in added:
            sequence.slot.cached.extend(tokens)
        sampled = len(events)
        for sequence in [s for s in self._active if s.logits_row >= 0]:
            self._sample(sequence, events)
        # After the decode: how far each sequence that took part has got (for a long prompt,
        # one report per batch of it). Put before what was sampled, so a prompt's last report
        # comes before its first text and before the outcome of one that has just finished.
        events[sampled:sampled] = [(s, s.progress(s.decoded)) for s, _ in added]
        return events

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._slots.close()  # saves the slots' states (to disk with --cachedir) first
        self._batch.free()
        if self._embedder is not None:  # its context uses the model: freed first
            self._embedder.close()
        self._companions.close()
        self._loaded.close()

    def _embeddings(self) -> Embedder:
        """The embedding context on this model, created when first needed: most servers
        never embed, and it costs memory."""
        if self._embedder is None:
            self._embedder = Embedder.on_model(self._loaded, self._settings)
            logger.info(
                "Embeddings from %s: %d dimensions, at most %d tokens per input",
                self._name,
                self._embedder.size,
                self._embedder.capacity,
            )
        return self._embedder

    # -- a step ----------------------------------------------------------------------------

    def _sample(self, sequence: Sequence, events: Events) -> None:
        """Sample the sequence's rows of this decode, each token through `_take`: its next
        token's row, then those of the draft tokens sampled alike (Sequence.sample_rows,
        which says why this samples exactly as without speculation); the rest of the draft
        leaves the KV cache."""
        first, drafted = len(events), bool(sequence.draft)
        rejected = sequence.sample_rows(lambda row: self._take(sequence, row, events))
        if drafted:  # the tokens of one decode: one event
            events[first:] = joined_text(events[first:])
        # Never fails on a KV cache (a recurrent model's state does not speculate).
        if not sequence.drop_rejected(self._loaded.memory, rejected):
            self._slots.forget(sequence.slot)
            if sequence in self._active:
                error = "could not drop rejected draft tokens from the KV cache"
                self._finish(sequence, FinishReason.ERROR, events, error=error)

    def _take(self, sequence: Sequence, row: int, events: Events) -> int | None:
        """Sample `row` for the sequence and take the token into its reply (stop strings,
        max_tokens, the end of generation, log-probabilities, the thinking budget). Returns
        the token, or None when the sequence has finished."""
        now = time.perf_counter()
        sequence.prompt_done = sequence.prompt_done or now
        try:
            token, logprob = draw(self._loaded, sequence, row, self._piece_buffer)
        except Exception as exc:  # this sequence fails; its slot and sampler are freed
            logger.exception("[%s] sampling failed", sequence.request.request_id)
            self._finish(sequence, FinishReason.ERROR, events, error=f"sampling failed: {exc}")
            return None
        if self._loaded.is_end(token):
            self._finish(sequence, FinishReason.STOP, events)
            return None
        sequence.generated += 1
        sequence.held_tokens.append(token)
        if logprob is not None:
            sequence.held_logprobs.append(logprob)
        special = sequence.request.render_special_tokens  # harmony's channels are control tokens
        text, stop = sequence.pipeline.push(self._loaded.token_bytes(token, special=special))
        if sequence.thought is not None:  # control-token tags (harmony's) show only this way
            sequence.thought.saw(self._loaded.token_bytes(token, special=True))
        if text:
            sequence.first_text_at = sequence.first_text_at or now
            events.append((sequence, sequence.release(text)))
        if stop is not None:
            self._finish(sequence, FinishReason.STOP, events, stop_sequence=stop)
        elif sequence.generated >= sequence.max_tokens:
            self._finish(sequence, FinishReason.LENGTH, events)
        elif sequence.loops is not None and sequence.loops.looping_after(text):
            sequence.looped = True  # ended as at max_tokens, saying why (server/core/text/loops.py)
            self._finish(sequence, FinishReason.LENGTH, events)
        elif len(sequence.slot.cached) >= self._loaded.slot_context:
            self._finish(sequence, FinishReason.LENGTH, events)  # the slot's context is full
        else:
            return token
        return None

    def _finish(
        self,
        sequence: Sequence,
        reason: FinishReason,
        events: Events,
        *,
        stop_sequence: str | None = None,
        error: str | None = None,
    ) -> None:
        self._active.remove(sequence)
        llama.llama_sampler_free(sequence.sampler)
        if sequence.media is not None:
            sequence.media.free()
        if stop_sequence is None and reason is not FinishReason.ERROR:
            rest = sequence.pipeline.finish()
            if rest or sequence.held_tokens:
                sequence.first_text_at = sequence.first_text_at or time.perf_counter()
                events.append((sequence, sequence.release(rest)))
        events.append((sequence, sequence.outcome(reason, stop_sequence, error)))
