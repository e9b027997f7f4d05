"""Images through the engine on the real model with a projector (`--mmproj`): a tiny Gemma 3
projector with random weights, written by the test (tests/support/projector_gguf.py), paired
with the bundled Gemma 3 model. It shows the plumbing: an image changes the next token's
log-probabilities, two images differ, the same image twice reads the same, its tokens are
counted, a cached prefix holding an image is reused whole (and never cut inside it), a text
request is batched beside an image, and what cannot be read is refused with the reason."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.core.llama.engine import LlamaCppEngine
from server.core.llama.loading.media import stand_ins
from server.core.scheduling.engine import EngineError
from server.core.types import (
    MEDIA_MARKER,
    GenerationOutcome,
    GenerationRequest,
    MediaInput,
    SamplingParams,
    TokenEvent,
)
from server.process.load_settings import load_settings
from server.settings.config import HearthSettings
from tests.support.logits import SHAPE_TOLERANCE
from tests.support.projector_gguf import media_tokens_per_image, png_bytes, write_projector

RED, BLUE = (220, 30, 30), (20, 40, 230)
SAME = 1e-4  # one request read twice in the same state, on the same CPU
PER_IMAGE = media_tokens_per_image(32, 4)


@pytest.fixture(scope="module")
def vision_engine(bundled: Path, tiny_projector: Path) -> Iterator[LlamaCppEngine]:
    settings = HearthSettings(
        contextsize=2048, threads=2, parallelrequests=2, mmproj=str(tiny_projector)
    )
    loaded = LlamaCppEngine.load(bundled, load_settings(settings, bundled))
    yield loaded
    loaded.close()


def image(color: tuple[int, int, int]) -> MediaInput:
    return MediaInput("image", png_bytes(16, 16, color), "image/png", 16, 16)


def ask(vision_engine: LlamaCppEngine, *items: MediaInput, text: str = "") -> GenerationRequest:
    markers = " ".join(MEDIA_MARKER for _ in items)
    prompt = f"Here is a picture: {markers} {text}What does it show? It shows"
    sampling = SamplingParams(temperature=0.0)
    return GenerationRequest("media", prompt, 1, sampling, media=items, logprobs=5)


def run(
    vision_engine: LlamaCppEngine, request: GenerationRequest
) -> tuple[dict[int, float], GenerationOutcome]:
    """The first token's top log-probabilities, and the outcome."""
    top: dict[int, float] = {}
    outcome = None
    for event in vision_engine.generate(request, threading.Event()):
        if isinstance(event, TokenEvent) and event.logprobs and not top:
            top = {choice.token_id: choice.logprob for choice in event.logprobs[0].top}
        if isinstance(event, GenerationOutcome):
            outcome = event
    assert outcome is not None and outcome.error is None, outcome
    return top, outcome


def differ(one: dict[int, float], other: dict[int, float]) -> float:
    shared = one.keys() & other.keys()
    return max(
        [abs(one[t] - other[t]) for t in shared] + [0.0 if one.keys() == other.keys() else 1.0]
    )


@pytest.mark.model
def test_the_projector_gives_the_model_vision(vision_engine: LlamaCppEngine) -> None:
    assert vision_engine.modalities == frozenset({"vision"})


@pytest.mark.model
def test_an_image_moves_the_logits_and_the_same_image_reads_the_same(
    vision_engine: LlamaCppEngine,
) -> None:
    red, red_outcome = run(vision_engine, ask(vision_engine, image(RED)))
    blue, _ = run(vision_engine, ask(vision_engine, image(BLUE)))
    fresh = ask(vision_engine, image(RED))
    again, _ = run(vision_engine, GenerationRequest(**{**_fields(fresh), "reuse_cache": False}))
    assert differ(red, blue) > 1e-3  # another picture, another next token's distribution
    assert differ(red, again) <= SAME
    text_only, text_outcome = run(vision_engine, ask(vision_engine))
    # The image's tokens are counted: the prompt with it is longer by its tokens, less the
    # space the marker's place took in the text.
    assert red_outcome.prompt_tokens - text_outcome.prompt_tokens >= PER_IMAGE
    assert differ(red, text_only) > 1e-3


@pytest.mark.model
def test_a_cached_prefix_with_an_image_is_reused_whole(vision_engine: LlamaCppEngine) -> None:
    first = ask(vision_engine, image(BLUE), text="Look closely. ")
    _, cold = run(vision_engine, first)
    _, warm = run(vision_engine, GenerationRequest(**{**_fields(first), "request_id": "again"}))
    assert warm.reused_prompt_tokens == warm.prompt_tokens - 1  # all but the last token
    assert warm.reused_prompt_tokens > cold.reused_prompt_tokens
    # another image at the same place: the cache is reused up to it, not into it
    _, other = run(vision_engine, ask(vision_engine, image(RED), text="Look closely. "))
    assert other.reused_prompt_tokens < warm.reused_prompt_tokens - PER_IMAGE


@pytest.mark.model
def test_a_text_request_batches_beside_an_image(vision_engine: LlamaCppEngine) -> None:
    alone, _ = run(vision_engine, ask(vision_engine, image(RED)))
    cancelled = threading.Event()
    text = GenerationRequest("text", "Once upon a time", 12, SamplingParams(temperature=0.0))
    other = vision_engine.start_sequence(text, cancelled)
    with_image = vision_engine.start_sequence(ask(vision_engine, image(RED)), threading.Event())
    finished: set[object] = set()
    while len(finished) < 2:
        for owner, event in vision_engine.step():
            if isinstance(event, GenerationOutcome):
                assert event.error is None
                finished.add(owner)
    assert {other, with_image} == finished
    assert alone  # (the image request was read while the text one generated)


@pytest.mark.model
def test_what_cannot_be_read_is_refused_with_the_reason(vision_engine: LlamaCppEngine) -> None:
    with pytest.raises(EngineError, match="places 0 media items but the request has 1"):
        run(vision_engine, GenerationRequest("m", "no marker", 1, media=(image(RED),)))
    sound = MediaInput("audio", b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio/wav")
    with pytest.raises(EngineError, match="audio input is not supported"):
        run(vision_engine, ask(vision_engine, sound))
    broken = MediaInput("image", png_bytes(16, 16, RED)[:40], "image/png", 16, 16)
    with pytest.raises(EngineError, match="media item 1"):
        run(vision_engine, ask(vision_engine, broken))
    # Gemma 3's projector closes each image with its <end_of_image> text token, so even a
    # prompt that ends with an image has text to start the reply from.
    ends_with_image = GenerationRequest("m", f"Look: {MEDIA_MARKER}", 1, media=(image(RED),))
    assert run(vision_engine, ends_with_image)[1].completion_tokens == 1
    # the engine serves on after each
    assert run(vision_engine, ask(vision_engine, image(BLUE)))[1].completion_tokens == 1


@pytest.mark.model
def test_a_projector_for_another_model_is_refused_at_load(bundled: Path, tmp_path: Path) -> None:
    wrong = write_projector(tmp_path / "wide.gguf", bundled, n_embd=320)
    settings = HearthSettings(contextsize=512, threads=2, mmproj=str(wrong))
    with pytest.raises(EngineError) as refused:
        LlamaCppEngine.load(bundled, load_settings(settings, bundled))
    message = str(refused.value)
    assert message.startswith("--mmproj wide.gguf: ") and "n_embd" in message, message
    assert "\n" not in message


def test_stand_ins_are_negative_and_name_the_image_and_the_place() -> None:
    one, other = stand_ins(b"a" * 64, 4), stand_ins(b"b" * 64, 4)
    assert all(token < 0 for token in one + other)
    assert len(set(one)) == 4 and not set(one) & set(other)
    assert stand_ins(b"a" * 64, 4) == one


def _fields(request: GenerationRequest) -> dict[str, object]:
    return {name: getattr(request, name) for name in request.__dataclass_fields__}


@pytest.mark.model
def test_an_image_is_encoded_while_other_sequences_go_on(
    vision_engine: LlamaCppEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The projector's encode runs on its own thread: held there (the test holds it), the
    other sequence keeps generating and the image's request waits at its image; released, it
    reads the image and answers as it does when nothing holds it."""
    asked = GenerationRequest(
        **{**_fields(ask(vision_engine, image(BLUE), text="Once more. ")), "reuse_cache": False}
    )
    alone, _ = run(vision_engine, asked)
    tiny_projector = vision_engine._companions.projector
    assert tiny_projector is not None
    real_encode = tiny_projector._encode
    release, threads = threading.Event(), []

    def held_encode(chunk: object) -> object:
        threads.append(threading.current_thread().name)
        release.wait(timeout=60)  # a safety net: the test sets it
        return real_encode(chunk)

    monkeypatch.setattr(tiny_projector, "_encode", held_encode)
    text = GenerationRequest("text", "Once upon a time", 200, SamplingParams(temperature=0.0))
    writer = vision_engine.start_sequence(text, threading.Event())
    reader = vision_engine.start_sequence(asked, threading.Event())
    written = 0
    while written < 5:  # the image is held: the writer goes on regardless
        for owner, event in vision_engine.step():
            assert owner is not reader or not isinstance(event, (TokenEvent, GenerationOutcome))
            written += owner is writer and isinstance(event, TokenEvent)
    assert reader.decoded == reader.media.spans[0].start  # waiting at its image
    release.set()
    top: dict[int, float] = {}
    while reader in vision_engine._active:
        for owner, event in vision_engine.step():
            if owner is reader and isinstance(event, TokenEvent) and event.logprobs:
                top = {c.token_id: c.logprob for c in event.logprobs[0].top}
    writer.cancelled.set()
    while vision_engine._active:
        vision_engine.step()
    assert threads and all(name.startswith("hearth-media") for name in threads)
    assert differ(alone, top) <= SHAPE_TOLERANCE  # read beside the writer: another shape
