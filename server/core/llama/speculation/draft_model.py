"""Speculative decoding's other drafter: a second, smaller model on the same vocabulary
(KoboldCpp's `--draftmodel`, llama-server's `--spec-draft-model`), which guesses the next tokens
greedily; the engine then checks the guesses in one decode of the real model
(server/core/llama/speculation/speculation.py says how, and why the output stays the same).

The draft model has its own context, with one sequence per slot of the real model's, so each
slot's draft KV cache keeps the slot's text and a new draft only decodes what is new since the
last one (the accepted tokens, and once the prompt). As llama-server did until recently, a draft
stops at a guess the draft model itself is unsure of (its top token's probability among its
ten best under `--spec-draft-p-min`, 0.75 by default; llama-server's default is now 0): such
guesses are mostly rejected, and each rejected token costs a row of the real model's decode.

Refused at load, with the reason in one line: a draft model whose vocabulary is not the real
model's (llama-server's `common_speculative_are_compatible` rule: the same tokenizer kind, BOS
and EOS, at most 128 tokens more or fewer, and the same text for every token from id 5 on);
its token ids would mean other words.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import llama_cpp as llama
import numpy as np

from server.core.llama.loading.model import LoadedModel
from server.core.llama.speculation.speculation import Speculator, speculators
from server.core.load_settings import LoadSettings, ModelOptions, SpeculationSettings
from server.core.scheduling.engine import EngineError

logger = logging.getLogger(__name__)

# The draft model's top tokens that its confidence is measured among (llama-server's top-k 10).
_TOP = 10
# llama-server's limits for "the same vocabulary": sizes may differ by this many tokens
# (added tokens at the end), and ids below _FIRST_CHECKED (control tokens) are not compared.
_MOST_EXTRA_TOKENS = 128
_FIRST_CHECKED = 5


def draft_settings(settings: LoadSettings) -> LoadSettings:
    """The real model's load settings as the draft model takes them: its own GPU layers and
    split, the same context and KV cache type, none of the settings meant for one model file
    (metadata and tensor overrides, RoPE, experts), on this machine's devices only."""
    spec = settings.speculation
    options = ModelOptions(
        flash_attention=settings.options.flash_attention,
        cache_type_k=settings.options.cache_type_k,
        cache_type_v=settings.options.cache_type_v,
        load_mode=settings.options.load_mode,
        offload_kv=settings.options.offload_kv,
    )
    return replace(
        settings,
        gpulayers=spec.draft_gpu_layers,
        tensor_split=spec.draft_gpu_split,
        rpc=None,
        options=options,
        speculation=SpeculationSettings(),
    )


def vocabulary_difference(target: LoadedModel, draft: LoadedModel) -> str | None:
    """Why `draft`'s token ids do not mean `target`'s, in words; None when they do."""
    t, d = target.vocab, draft.vocab
    if abs(target.n_vocab - draft.n_vocab) > _MOST_EXTRA_TOKENS:
        return f"it has {draft.n_vocab} tokens, the model {target.n_vocab}"
    if llama.llama_vocab_type(t) != llama.llama_vocab_type(d):
        return "its tokenizer is of another kind"
    if (target.bos, target.add_bos) != (draft.bos, draft.add_bos):
        return "its beginning-of-text token differs"
    if llama.llama_vocab_eos(t) != llama.llama_vocab_eos(d):
        return "its end-of-text token differs"
    for token in range(_FIRST_CHECKED, min(target.n_vocab, draft.n_vocab)):
        if llama.llama_vocab_get_text(t, token) != llama.llama_vocab_get_text(d, token):
            return f"token {token} is another text in it"
    return None


class DraftModel:
    """The loaded draft model and its per-slot KV caches; freed once by `close()`."""

    def __init__(self, loaded: LoadedModel, batch_size: int) -> None:
        self.loaded = loaded
        self._batch = llama.llama_batch_init(batch_size, 0, 1)
        self._batch_size = batch_size
        self._cached: dict[int, list[int]] = {}  # per sequence id: the tokens in its KV cache

    @classmethod
    def load(cls, path: Path, target: LoadedModel, settings: LoadSettings) -> DraftModel:
        """Load `path` as the draft model for `target`; EngineError when it cannot draft."""
        if not path.is_file():
            raise EngineError(f"--draftmodel {path}: no such file")
        logger.info("Loading the draft model %s", path.name)
        loaded = LoadedModel.load(path, draft_settings(settings))
        difference = vocabulary_difference(target, loaded)
        if difference is not None:
            loaded.close()
            raise EngineError(
                f"--draftmodel {path.name} cannot draft for {target.path.name}: its "
                f"vocabulary is not the model's ({difference}); choose a smaller model of "
                "the same family, or n-gram speculation (--spec-type ngram-simple)"
            )
        return cls(loaded, settings.batch_size)

    @classmethod
    def beside(cls, loaded: LoadedModel, settings: LoadSettings) -> DraftModel | None:
        """The draft model --draftmodel names, for `loaded`; None when none."""
        path = settings.speculation.draft_model
        return cls.load(Path(path).expanduser(), loaded, settings) if path else None

    def drafter(self, seq_id: int, settings: SpeculationSettings) -> ModelDrafter:
        return ModelDrafter(self, seq_id, settings.draft_min, settings.draft_p_min)

    def guess(self, seq_id: int, tokens: Sequence[int], limit: int, confident: float) -> list[int]:
        """Up to `limit` tokens the draft model expects after `tokens`, greedily; fewer when
        it is less sure of one than `confident`. Its KV cache for `seq_id` keeps `tokens`
        and the guesses."""
        limit = min(limit, self.loaded.slot_context - len(tokens) - 1)
        if limit <= 0 or not self._catch_up(seq_id, tokens):
            return []
        guesses: list[int] = []
        while True:
            token, confidence = self._best_guess()
            if confidence < confident:
                break
            guesses.append(token)
            if len(guesses) >= limit or not self._decode(seq_id, [token], len(tokens)):
                break
            tokens = [*tokens, token]
        return guesses

    def close(self) -> None:
        if self._batch is not None:
            llama.llama_batch_free(self._batch)
            self._batch = None
        self.loaded.close()

    def _catch_up(self, seq_id: int, tokens: Sequence[int]) -> bool:
        """Make the KV cache of `seq_id` hold `tokens`, the last one decoded now (its
        logits are the first guess's): keep the longest common prefix, decode the rest."""
        cached = self._cached.setdefault(seq_id, [])
        keep, most = 0, min(len(cached), len(tokens) - 1)
        while keep < most and cached[keep] == tokens[keep]:
            keep += 1
        memory = self.loaded.memory
        if not llama.llama_memory_seq_rm(memory, seq_id, keep, -1):
            llama.llama_memory_seq_rm(memory, seq_id, -1, -1)  # a state that cannot be cut
            keep = 0
        del cached[keep:]
        rest = list(tokens[keep:])
        for start in range(0, len(rest), self._batch_size):
            chunk = rest[start : start + self._batch_size]
            if not self._decode(seq_id, chunk, keep + start):
                return False
        return True

    def _decode(self, seq_id: int, tokens: list[int], position: int) -> bool:
        """Decode `tokens` at `position` on, logits for the last one; False on failure (the
        sequence's draft cache is then forgotten, and this step drafts nothing)."""
        batch = self._batch
        for row, token in enumerate(tokens):
            batch.token[row] = token
            batch.pos[row] = position + row
            batch.n_seq_id[row] = 1
            batch.seq_id[row][0] = seq_id
            batch.logits[row] = row == len(tokens) - 1
        batch.n_tokens = len(tokens)
        cached = self._cached[seq_id]
        if llama.llama_decode(self.loaded.context, batch) != 0:
            llama.llama_memory_seq_rm(self.loaded.memory, seq_id, -1, -1)
            cached.clear()
            return False
        cached.extend(tokens)
        return True

    def _best_guess(self) -> tuple[int, float]:
        """The last decoded row's likeliest token and its probability among the top few."""
        pointer = llama.llama_get_logits_ith(self.loaded.context, -1)
        logits = np.ctypeslib.as_array(pointer, shape=(self.loaded.n_vocab,))
        top = np.argpartition(logits, -_TOP)[-_TOP:]
        scores = logits[top].astype(np.float64)
        best = int(np.argmax(scores))
        weights = np.exp(scores - scores[best])
        return int(top[best]), float(1.0 / weights.sum())


def engine_speculators(
    loaded: LoadedModel, settings: SpeculationSettings, draft: DraftModel | None
) -> Callable[[int], Speculator] | None:
    """The engine's speculators (speculation.speculators), or None for a model whose state
    cannot drop rejected draft tokens (a recurrent or hybrid model's)."""
    made = speculators(settings, draft)
    model = loaded.model
    if made and (llama.llama_model_is_recurrent(model) or llama.llama_model_is_hybrid(model)):
        logger.warning("Speculative decoding is off: this model's state cannot drop tokens")
        return None
    return made


class ModelDrafter:
    """One sequence's drafter over the draft model (speculation.Drafter)."""

    def __init__(self, model: DraftModel, seq_id: int, shortest: int, confident: float) -> None:
        self._model = model
        self._seq_id = seq_id
        self._shortest = shortest  # llama-server's --spec-draft-n-min
        self._confident = confident  # its --spec-draft-p-min

    def propose(self, tokens: Sequence[int], last: int, limit: int) -> list[int]:
        if limit <= 0 or limit < self._shortest:
            return []
        draft = self._model.guess(self._seq_id, [*tokens, last], limit, self._confident)
        return draft if len(draft) >= max(1, self._shortest) else []
