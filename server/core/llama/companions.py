"""What loads beside a model and serves with it: its draft model (speculative decoding,
draft_model.py) and its multimodal projector (images and sounds, media.py); and a prompt read
with its media, fitted to the context.

Kept out of engine.py so the engine's step stays readable: the engine asks here for a
request's prompt tokens, and for the media items due to be decoded in the next step.
"""

from __future__ import annotations

import logging
from concurrent.futures import wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.core.llama.loading.media import MediaPrompt, Projector
from server.core.llama.loading.model import LoadedModel
from server.core.llama.sequences.sequence import Sequence
from server.core.llama.speculation.draft_model import DraftModel
from server.core.llama.speculation.speculation import describe
from server.core.load_settings import LoadSettings
from server.core.scheduling.engine import EngineError, MediaError
from server.core.types import GenerationRequest

logger = logging.getLogger(__name__)

# A prompt read with its media: (max_tokens, tokens, trimmed, the media) as LoadedModel.fit.
FittedPrompt = tuple[int, list[int], bool, MediaPrompt | None]


@dataclass
class Companions:
    """The draft model and the projector of one loaded model (either may be absent)."""

    draft: DraftModel | None = None
    projector: Projector | None = None
    batch_size: int = 512  # an image's tokens are decoded in one micro-batch: at most this

    @property
    def modalities(self) -> frozenset[str]:
        """What the model takes besides text: "vision", "audio" (from its projector)."""
        return frozenset() if self.projector is None else self.projector.modalities

    def fit(self, loaded: LoadedModel, request: GenerationRequest) -> FittedPrompt:
        """The request's prompt tokens, as LoadedModel.fit; with media, read through the
        projector and never trimmed (a cut could fall inside an image): too long is refused."""
        if not request.media:
            return (*loaded.fit(request), None)
        if self.projector is None:
            raise MediaError(f"{request.media[0].kind} input is not supported: no --mmproj")
        media = self.projector.read(request, loaded.add_bos)
        limit, max_tokens = loaded.budget(request)
        try:
            _check_fits(media, max_tokens, limit, self.batch_size)
        except EngineError:
            media.free()
            raise
        return max_tokens, media.tokens, False, media

    def read_media(self, active: list[Sequence], context: Any) -> list[Sequence]:
        """Decode every media item a sequence has reached in its prompt and whose embeddings
        are ready, each in a decode of its own (before the step's shared one); one still being
        encoded waits (the sequence's text stops at it). Returns the sequences whose item
        failed."""
        failed = []
        for sequence in active:
            media = sequence.media
            if media is None or self.projector is None or sequence.next_token is not None:
                continue
            # Started at the sequence's first step, for the items not in its cached prefix,
            # while the text before them is read.
            self.projector.encode_later(media, sequence.decoded)
            while (span := media.span_at(sequence.decoded)) is not None and span.ready:
                seq_id = sequence.slot.seq_id
                if not self.projector.decode(span, context, seq_id, self.batch_size):
                    failed.append(sequence)
                    break
                sequence.decoded += span.length
                sequence.slot.cached.extend(sequence.prompt[span.start : sequence.decoded])
        return failed

    def wait_for_media(self, active: list[Sequence]) -> None:
        """When a step had nothing to decode: wait for an item a sequence is held at, rather
        than stepping again at once (which would spin beside the encode)."""
        for sequence in active:
            span = None if sequence.media is None else sequence.media.waiting(sequence.decoded)
            if span is not None and span.encoded is not None:
                wait([span.encoded])
                return

    def close(self) -> None:
        if self.draft is not None:
            self.draft.close()
        if self.projector is not None:
            self.projector.close()


def _check_fits(media: MediaPrompt, max_tokens: int, limit: int, batch: int) -> None:
    """Refuse a prompt with media that cannot be read: too long for the context (the
    client's to shorten: a text prompt is cut to fit, but not through an image, so a 400),
    or an item of more tokens than one micro-batch (llama.cpp would abort the process on it;
    the server's --batchsize to raise, so a 500)."""
    if len(media.tokens) + max_tokens > limit:
        raise MediaError(
            f"the prompt with its media takes {len(media.tokens)} tokens, and {max_tokens} "
            f"more are to be generated: more than the {limit} of the context"
        )
    largest = max((span.length for span in media.spans), default=0)
    if largest > batch:
        raise EngineError(
            f"an image takes {largest} tokens, more than one batch of {batch} "
            f"(--batchsize): start the server with --batchsize {largest} or more"
        )


def load_model(path: Path, settings: LoadSettings) -> tuple[LoadedModel, Companions]:
    """The model and what loads beside it; nothing is left loaded when one of them fails."""
    loaded = LoadedModel.load(path, settings)
    _say_loaded(path, settings)
    companions = Companions(batch_size=settings.batch_size)
    try:
        companions.draft = DraftModel.beside(loaded, settings)
        companions.projector = _projector(path, loaded, settings)
    except BaseException:
        companions.close()
        loaded.close()
        raise
    return loaded, companions


def _projector(path: Path, loaded: LoadedModel, settings: LoadSettings) -> Projector | None:
    media = settings.media
    if not media.projector:
        return None
    if media.for_model is not None and Path(media.for_model).resolve() != path.resolve():
        return None  # made for another model of the folder (--modeldir)
    projector = Projector.load(
        Path(media.projector).expanduser(),
        loaded.model,
        threads=settings.thread_count,
        on_gpu=not media.on_cpu and loaded.placement.gpu_layers > 0,
        tokens=media.image_tokens,
    )
    kinds = " and ".join(sorted(projector.modalities)) or "nothing"
    logger.info("Projector %s: the model takes %s", projector.path.name, kinds)
    return projector


def _say_loaded(path: Path, settings: LoadSettings) -> None:
    slots = max(1, settings.parallelrequests)
    logger.info(
        "Loaded %s: context %d tokens, %d threads, batch %d%s",
        path.name,
        settings.contextsize,
        settings.thread_count,
        settings.batch_size,
        f", {slots} parallel slots of {settings.contextsize // slots} tokens"
        " (ContextShift is off with parallel requests)"
        if slots > 1
        else "",
    )
    for line in describe(settings.speculation):
        logger.info("%s", line)
