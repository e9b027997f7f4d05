"""Groundwork for images (issue 28): llama.cpp's multimodal library, libmtmd, driven through
llama-cpp-python's own bindings (llama_cpp.mtmd_cpp) on the bundled Gemma 3 270M with a tiny
random gemma3 projector (tests/support/projector_gguf.py). It pins down the calls the engine
will make and how the library meets good and bad media; docs/notes/mtmd-findings.md says what
was found and why."""

from __future__ import annotations

import ctypes
import hashlib
import io
import os
import signal
import subprocess
import sys
import threading
import wave
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp as llama
import numpy as np
import pytest
from llama_cpp import mtmd_cpp as mtmd

from server.models.files import bundled_model_path
from tests.support.projector_gguf import media_tokens_per_image, png_bytes, write_projector
from tests.support.servers import ROOT

pytestmark = pytest.mark.model

N_BATCH = 512
# One thread for the text context and one for the projector: on the 2-core test machine, busy
# with other tests, ggml's spinning workers slow to a crawl when there are more of them than
# cores (measured 3-5x slower with 2 each), and the concurrency test runs both at once.
THREADS = 1
RED = (220, 30, 30)
BLUE = (20, 40, 230)
SAME_LOGITS = 1e-4  # one request read twice in the same state, on the same CPU

_GGML_LOG_LEVEL_ERROR = 4
_MTMD_ERRORS: list[str] = []


def _keep_errors(level: int, text: bytes, _user_data: Any) -> None:
    if level == _GGML_LOG_LEVEL_ERROR:
        _MTMD_ERRORS.append(text.decode("utf-8", errors="replace"))


# Module level: libmtmd keeps the C pointer after the tests that set it are gone.
_MTMD_LOG = llama.llama_log_callback(_keep_errors)


@dataclass
class Vision:
    model: Any
    context: Any
    media: Any  # the mtmd_context
    vocab: Any
    # ffmpeg_bin_dir set to an empty folder: the helper falls back to ffprobe/ffmpeg for bytes
    # it cannot read as an image, and must not launch them (see the findings).
    options: mtmd.mtmd_helper_init_opt

    @property
    def marker(self) -> str:
        return str(mtmd.mtmd_default_marker().decode())

    def prompt(self, question: str = "What is in this picture?") -> str:
        return (
            f"<start_of_turn>user\n{question} {self.marker} Say it in one word.<end_of_turn>\n"
            "<start_of_turn>model\n"
        )

    def token(self, text: str) -> int:
        buffer = (llama.llama_token * 8)()
        data = text.encode()
        count = llama.llama_tokenize(self.vocab, data, len(data), buffer, 8, False, True)
        assert count == 1, text
        return int(buffer[0])

    def last_logits(self) -> np.ndarray:
        n_vocab = llama.llama_vocab_n_tokens(self.vocab)
        row = llama.llama_get_logits_ith(self.context, -1)
        return np.ctypeslib.as_array(row, shape=(n_vocab,)).copy()

    def forget(self) -> None:
        llama.llama_memory_clear(llama.llama_get_memory(self.context), True)


def text_context(model: Any, n_ubatch: int) -> Any:
    params = llama.llama_context_default_params()
    params.n_ctx = 1024
    params.n_batch = N_BATCH
    params.n_ubatch = n_ubatch
    params.n_threads = params.n_threads_batch = THREADS
    context = llama.llama_init_from_model(model, params)
    assert context
    return context


def media_params() -> Any:
    params = mtmd.mtmd_context_params_default()
    params.use_gpu = False
    params.n_threads = THREADS
    params.print_timings = False
    return params


@pytest.fixture(scope="module")
def vision(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vision]:
    folder = tmp_path_factory.mktemp("projector")
    projector = write_projector(folder / "mmproj.gguf", bundled_model_path())
    llama.llama_backend_init()
    mtmd.mtmd_helper_log_set(_MTMD_LOG, None)
    model_params = llama.llama_model_default_params()
    model_params.n_gpu_layers = 0
    model = llama.llama_model_load_from_file(str(bundled_model_path()).encode(), model_params)
    assert model
    context = text_context(model, N_BATCH)
    media = mtmd.mtmd_init_from_file(str(projector).encode(), model, media_params())
    assert media, _MTMD_ERRORS
    options = mtmd.mtmd_helper_init_opt_default()
    (folder / "no-ffmpeg").mkdir()
    options.video_params.ffmpeg_bin_dir = str(folder / "no-ffmpeg").encode()
    try:
        yield Vision(model, context, media, llama.llama_model_get_vocab(model), options)
    finally:
        mtmd.mtmd_free(media)
        llama.llama_free(context)
        llama.llama_model_free(model)
        mtmd.mtmd_helper_log_set(llama.llama_log_callback(), None)  # NULL: back to stderr


@contextmanager
def bitmap_of(vision: Vision, data: bytes) -> Iterator[Any]:
    """The helper's bitmap for a file's bytes (None when it cannot read them)."""
    buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(
        vision.media, buffer, len(data), False, vision.options
    )
    try:
        yield bitmap
    finally:
        if bitmap:
            mtmd.mtmd_bitmap_free(bitmap)


@contextmanager
def chunks_of(vision: Vision, prompt: str, bitmaps: list[Any]) -> Iterator[Any]:
    chunks = mtmd.mtmd_input_chunks_init()
    try:
        assert tokenize(vision, chunks, prompt, bitmaps) == 0, _MTMD_ERRORS[-1:]
        yield chunks
    finally:
        mtmd.mtmd_input_chunks_free(chunks)


def tokenize(vision: Vision, chunks: Any, prompt: str, bitmaps: list[Any]) -> int:
    text = mtmd.mtmd_input_text()
    encoded = prompt.encode()
    text.text = encoded
    text.text_len = len(encoded)
    text.add_special = True  # the BOS
    text.parse_special = True  # the turn markers
    array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
    return int(mtmd.mtmd_tokenize(vision.media, chunks, ctypes.byref(text), array, len(bitmaps)))


def chunk_list(chunks: Any) -> list[Any]:
    return [
        mtmd.mtmd_input_chunks_get(chunks, i) for i in range(mtmd.mtmd_input_chunks_size(chunks))
    ]


def text_tokens(chunk: Any) -> list[int]:
    count = ctypes.c_size_t()
    tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
    return [int(tokens[i]) for i in range(count.value)]


def logits_after_image(vision: Vision, color: tuple[int, int, int]) -> np.ndarray:
    """Reads the prompt with a 16x16 image of `color` afresh; the next token's logits."""
    with (
        bitmap_of(vision, png_bytes(16, 16, color)) as bitmap,
        chunks_of(vision, vision.prompt(), [bitmap]) as chunks,
    ):
        vision.forget()
        n_past = llama.llama_pos(0)
        result = mtmd.mtmd_helper_eval_chunks(
            vision.media, vision.context, chunks, 0, 0, N_BATCH, True, ctypes.byref(n_past)
        )
        assert result == 0
        assert n_past.value == mtmd.mtmd_helper_get_n_pos(chunks)
        return vision.last_logits()


def test_the_projector_takes_images_and_no_audio(vision: Vision) -> None:
    assert mtmd.mtmd_support_vision(vision.media)
    assert not mtmd.mtmd_support_audio(vision.media)
    assert mtmd.mtmd_get_audio_sample_rate(vision.media) == -1
    assert mtmd.mtmd_get_marker(vision.media) == b"<__media__>"
    # Gemma 3 reads an image's tokens with bidirectional attention, positions one per token.
    assert mtmd.mtmd_decode_use_non_causal(vision.media, None)
    assert not mtmd.mtmd_decode_use_mrope(vision.media)


def test_the_capabilities_are_read_without_loading(vision: Vision, tmp_path: Path) -> None:
    projector = write_projector(tmp_path / "mmproj.gguf", bundled_model_path())
    caps = mtmd.mtmd_get_cap_from_file(str(projector).encode())
    assert (caps.inp_vision, caps.inp_audio) == (True, False)
    (tmp_path / "text.gguf").write_bytes(b"not a projector" * 10)
    caps = mtmd.mtmd_get_cap_from_file(str(tmp_path / "text.gguf").encode())
    assert (caps.inp_vision, caps.inp_audio) == (False, False)


@pytest.mark.parametrize("size", [(16, 16), (200, 90), (3, 5)])
def test_an_image_costs_the_projectors_media_tokens(vision: Vision, size: tuple[int, int]) -> None:
    """gemma3 letterboxes every image into image_size square: any size, the same tokens."""
    data = png_bytes(*size, RED)
    with bitmap_of(vision, data) as bitmap, chunks_of(vision, vision.prompt(), [bitmap]) as chunks:
        assert (mtmd.mtmd_bitmap_get_nx(bitmap), mtmd.mtmd_bitmap_get_ny(bitmap)) == size
        before, image, after = chunk_list(chunks)
        kinds = [mtmd.mtmd_input_chunk_get_type(chunk) for chunk in (before, image, after)]
        text, picture = mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT, mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE
        assert kinds == [text, picture, text]
        assert mtmd.mtmd_input_chunk_get_n_tokens(image) == media_tokens_per_image(32, 4) == 4
        assert mtmd.mtmd_input_chunk_get_n_pos(image) == 4
        # The helper names the image by its file's SHA-256: the key for caching its embedding.
        assert mtmd.mtmd_input_chunk_get_id(image) == hashlib.sha256(data).hexdigest().encode()
        # mtmd wraps the image in Gemma 3's own markers, as text tokens around it.
        assert text_tokens(before)[-1] == vision.token("<start_of_image>")
        assert text_tokens(after)[0] == vision.token("<end_of_image>")
        total = len(text_tokens(before)) + 4 + len(text_tokens(after))
        assert mtmd.mtmd_helper_get_n_tokens(chunks) == total
        assert mtmd.mtmd_helper_get_n_pos(chunks) == total


@pytest.mark.parametrize(
    ("image_size", "patch_size", "n_merge"), [(32, 4, 2), (48, 4, 4), (64, 8, 1)]
)
def test_the_token_count_follows_the_projectors_geometry(
    vision: Vision, tmp_path: Path, image_size: int, patch_size: int, n_merge: int
) -> None:
    projector = write_projector(
        tmp_path / "mmproj.gguf",
        bundled_model_path(),
        image_size=image_size,
        patch_size=patch_size,
        n_merge=n_merge,
    )
    media = mtmd.mtmd_init_from_file(str(projector).encode(), vision.model, media_params())
    assert media, _MTMD_ERRORS[-1:]
    other = Vision(vision.model, vision.context, media, vision.vocab, vision.options)
    try:
        with (
            bitmap_of(other, png_bytes(20, 20, BLUE)) as bitmap,
            chunks_of(other, other.prompt(), [bitmap]) as chunks,
        ):
            image = chunk_list(chunks)[1]
            expected = (image_size // patch_size // n_merge) ** 2
            assert mtmd.mtmd_input_chunk_get_n_tokens(image) == expected
            assert expected == media_tokens_per_image(image_size, patch_size, n_merge)
            assert mtmd.mtmd_encode_chunk(media, image) == 0
    finally:
        mtmd.mtmd_free(media)


def test_an_image_moves_the_next_token_logits(vision: Vision) -> None:
    red = logits_after_image(vision, RED)
    blue = logits_after_image(vision, BLUE)
    red_again = logits_after_image(vision, RED)
    # Measured: the two colours part by ~7.8 in the largest logit, against 0.0 for the same.
    assert np.abs(red - blue).max() > 0.1
    assert np.abs(red - red_again).max() <= SAME_LOGITS


def test_an_f16_projector_of_more_blocks_sees_too(vision: Vision, tmp_path: Path) -> None:
    projector = write_projector(
        tmp_path / "mmproj-f16.gguf", bundled_model_path(), layers=2, width=64, heads=4, f16=True
    )
    media = mtmd.mtmd_init_from_file(str(projector).encode(), vision.model, media_params())
    assert media, _MTMD_ERRORS[-1:]
    other = Vision(vision.model, vision.context, media, vision.vocab, vision.options)
    try:
        red, blue = logits_after_image(other, RED), logits_after_image(other, BLUE)
        assert np.abs(red - blue).max() > 0.1
    finally:
        mtmd.mtmd_free(media)


def test_a_kept_embedding_decodes_as_a_fresh_encode(vision: Vision) -> None:
    """The prompt cache's path: an image encoded once, its embedding kept (by the chunk's id),
    then decoded into the context later without the projector."""
    fresh = logits_after_image(vision, RED)
    n_embd = llama.llama_model_n_embd_inp(vision.model)
    with (
        bitmap_of(vision, png_bytes(16, 16, RED)) as red,
        bitmap_of(vision, png_bytes(16, 16, BLUE)) as blue,
        chunks_of(vision, vision.prompt(), [red]) as chunks,
        chunks_of(vision, vision.prompt(), [blue]) as other,
    ):
        before, image, after = chunk_list(chunks)
        assert mtmd.mtmd_encode_chunk(vision.media, image) == 0
        n_values = mtmd.mtmd_input_chunk_get_n_tokens(image) * n_embd
        output = mtmd.mtmd_get_output_embd(vision.media)
        kept = np.ctypeslib.as_array(output, shape=(n_values,)).copy()
        # The context's output buffer is reused by the next encode: a kept embedding is a copy.
        assert mtmd.mtmd_encode_chunk(vision.media, chunk_list(other)[1]) == 0

        vision.forget()
        n_past = llama.llama_pos(0)

        def read(chunk: Any, logits: bool) -> int:
            # The text path adds to *new_n_past, the image path sets it: keep it at n_past.
            return int(
                mtmd.mtmd_helper_eval_chunk_single(
                    vision.media, vision.context, chunk, n_past.value, 0, N_BATCH, logits,
                    ctypes.byref(n_past),
                )
            )  # fmt: skip

        assert read(before, logits=False) == 0
        embedding = kept.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        no_callback = mtmd.mtmd_helper_post_decode_callback()  # NULL: None is refused
        decoded = mtmd.mtmd_helper_decode_image_chunk(
            vision.media, vision.context, image, embedding, n_past.value, 0, N_BATCH,
            ctypes.byref(n_past), no_callback, None,
        )  # fmt: skip
        assert decoded == 0
        assert read(after, logits=True) == 0
        assert n_past.value == mtmd.mtmd_helper_get_n_pos(chunks)
    assert np.abs(vision.last_logits() - fresh).max() <= SAME_LOGITS


def test_images_encode_while_the_text_context_decodes(vision: Vision) -> None:
    """The projector has its own ggml graph and buffers: it can encode on one thread while the
    text context decodes on another, each getting what it gets alone."""
    words = "Once upon a time, in a lighthouse by the sea, there lived a keeper who " * 3
    prompt = words.encode()
    tokens = (llama.llama_token * 256)()
    n_tokens = llama.llama_tokenize(vision.vocab, prompt, len(prompt), tokens, 256, True, False)
    assert 0 < n_tokens < 256

    def decode_text() -> np.ndarray:
        vision.forget()
        batch = llama.llama_batch_get_one(tokens, n_tokens)
        assert llama.llama_decode(vision.context, batch) == 0
        return vision.last_logits()

    alone = decode_text()
    with (
        bitmap_of(vision, png_bytes(16, 16, RED)) as bitmap,
        chunks_of(vision, vision.prompt(), [bitmap]) as chunks,
    ):
        image = chunk_list(chunks)[1]
        n_values = mtmd.mtmd_input_chunk_get_n_tokens(image) * llama.llama_model_n_embd_inp(
            vision.model
        )

        def encode() -> np.ndarray:
            assert mtmd.mtmd_encode_chunk(vision.media, image) == 0
            output = mtmd.mtmd_get_output_embd(vision.media)
            return np.ctypeslib.as_array(output, shape=(n_values,)).copy()

        reference = encode()
        decoding, done = threading.Event(), threading.Event()
        during: list[np.ndarray] = []

        def encode_until_done() -> None:
            decoding.wait()
            while not done.is_set():
                embedding = encode()
                if not done.is_set():
                    during.append(embedding)

        encoder = threading.Thread(target=encode_until_done)
        encoder.start()
        decoding.set()
        together = decode_text()
        done.set()
        encoder.join()
    assert during, "no encode finished while the text was decoding"
    assert max(np.abs(embedding - reference).max() for embedding in during) <= 1e-6
    assert np.abs(together - alone).max() <= SAME_LOGITS


def test_a_projector_of_another_width_is_refused(vision: Vision, tmp_path: Path) -> None:
    projector = write_projector(tmp_path / "wide.gguf", bundled_model_path(), n_embd=320)
    _MTMD_ERRORS.clear()
    assert not mtmd.mtmd_init_from_file(str(projector).encode(), vision.model, media_params())
    assert any(
        "mismatch between text model (n_embd = 640) and mmproj (n_embd = 320)" in line
        for line in _MTMD_ERRORS
    ), _MTMD_ERRORS


def test_a_file_that_is_no_projector_is_refused(vision: Vision, tmp_path: Path) -> None:
    (tmp_path / "mmproj.gguf").write_bytes(b"GGUF" + b"\x00" * 60)
    _MTMD_ERRORS.clear()
    path = str(tmp_path / "mmproj.gguf").encode()
    assert not mtmd.mtmd_init_from_file(path, vision.model, media_params())
    assert any("Failed to load CLIP model" in line for line in _MTMD_ERRORS), _MTMD_ERRORS


def _wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(16000)
        sound.writeframes(b"\x00\x01" * 1600)
    return out.getvalue()


_PNG = png_bytes(64, 64, RED)
NOT_IMAGES = {
    "text": b"these bytes are not an image, nor sound, nor video " * 4,
    "empty": b"",
    "png signature only": _PNG[:8],
    "png cut in its pixels": _PNG[: len(_PNG) // 2 + 20],
    "png without its end": _PNG[:-12],
    "wav, no audio encoder": _wav(),
}


@pytest.mark.parametrize("name", NOT_IMAGES)
def test_bytes_that_are_no_image_are_refused(vision: Vision, name: str) -> None:
    with bitmap_of(vision, NOT_IMAGES[name]) as bitmap:
        assert not bitmap


def test_audio_is_refused_by_a_projector_without_an_audio_encoder(vision: Vision) -> None:
    samples = (ctypes.c_float * 1600)()
    sound = mtmd.mtmd_bitmap_init_from_audio(1600, samples)
    chunks = mtmd.mtmd_input_chunks_init()
    _MTMD_ERRORS.clear()
    try:
        assert mtmd.mtmd_bitmap_is_audio(sound)
        assert tokenize(vision, chunks, vision.prompt(), [sound]) != 0
        assert any("does not support audio input" in line for line in _MTMD_ERRORS)
    finally:
        mtmd.mtmd_input_chunks_free(chunks)
        mtmd.mtmd_bitmap_free(sound)


@pytest.mark.parametrize(("markers", "images"), [(0, 1), (2, 1), (1, 0)])
def test_markers_and_images_must_pair(vision: Vision, markers: int, images: int) -> None:
    prompt = "Look: " + " and ".join([vision.marker] * markers)
    chunks = mtmd.mtmd_input_chunks_init()
    with bitmap_of(vision, png_bytes(8, 8, BLUE)) as bitmap:
        try:
            assert tokenize(vision, chunks, prompt, [bitmap] * images) != 0
        finally:
            mtmd.mtmd_input_chunks_free(chunks)


def test_parts_keep_a_typed_marker_as_text(vision: Vision) -> None:
    """mtmd_tokenize_from_parts places each image where the caller puts it, so a user who
    types the marker gets text, not a "markers do not match" error or a misplaced image."""
    kept: list[Any] = []  # the texts and structs, alive until the call returns

    def text(words: str) -> Any:
        data = words.encode()
        part_text = mtmd.mtmd_input_text(data, len(data), False, True)
        part = mtmd.mtmd_input_part(ctypes.pointer(part_text), None)
        kept.extend([data, part_text])
        return part

    with bitmap_of(vision, png_bytes(8, 8, RED)) as bitmap:
        parts = [
            text(f"<start_of_turn>user\nI typed {vision.marker} myself. Look: "),
            mtmd.mtmd_input_part(None, bitmap),
            text("<end_of_turn>\n<start_of_turn>model\n"),
        ]
        array = (ctypes.POINTER(mtmd.mtmd_input_part) * 3)(*map(ctypes.pointer, parts))
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            assert mtmd.mtmd_tokenize_from_parts(vision.media, chunks, array, 3, True) == 0
            kinds = [mtmd.mtmd_input_chunk_get_type(chunk) for chunk in chunk_list(chunks)]
            assert kinds.count(mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE) == 1
            first = text_tokens(chunk_list(chunks)[0])
            assert first[0] == llama.llama_vocab_bos(vision.vocab)
            assert first[-1] == vision.token("<start_of_image>")
        finally:
            mtmd.mtmd_input_chunks_free(chunks)


def test_raw_pixels_make_an_image_the_caller_must_name(vision: Vision) -> None:
    """mtmd_bitmap_init takes RGB bytes as they are, and gives the image no id: a cache keyed
    by the media's hash has to set one (the file helper sets the file's SHA-256)."""
    pixels = bytes(range(5 * 3 * 3))
    buffer = (ctypes.c_uint8 * len(pixels)).from_buffer_copy(pixels)
    bitmap = mtmd.mtmd_bitmap_init(5, 3, buffer)
    empty = mtmd.mtmd_bitmap_init(0, 0, buffer)
    try:
        assert mtmd.mtmd_bitmap_get_n_bytes(bitmap) == len(pixels)
        assert mtmd.mtmd_bitmap_get_id(bitmap) == b""
        mtmd.mtmd_bitmap_set_id(bitmap, b"my-hash")
        with chunks_of(vision, vision.prompt(), [bitmap]) as chunks:
            assert mtmd.mtmd_input_chunk_get_id(chunk_list(chunks)[1]) == b"my-hash"
        # A 0x0 image is made, and refused when the prompt is tokenized.
        chunks = mtmd.mtmd_input_chunks_init()
        assert tokenize(vision, chunks, vision.prompt(), [empty]) != 0
        mtmd.mtmd_input_chunks_free(chunks)
    finally:
        mtmd.mtmd_bitmap_free(bitmap)
        mtmd.mtmd_bitmap_free(empty)


# An image of 16 tokens (n_merge 2) decoded into a context whose micro-batch holds 8: first
# by the helper in pieces of 8, then whole.
_SMALL_UBATCH = """
import ctypes, sys
from pathlib import Path
import llama_cpp as llama
from llama_cpp import mtmd_cpp as mtmd
from server.models.files import bundled_model_path
from tests.server.core.llama.test_projector_prototype import (
    RED, Vision, bitmap_of, chunks_of, media_params, text_context)
from tests.support.projector_gguf import png_bytes, write_projector

projector = write_projector(Path(sys.argv[1]), bundled_model_path(), n_merge=2)
llama.llama_backend_init()
params = llama.llama_model_default_params()
params.n_gpu_layers = 0
model = llama.llama_model_load_from_file(str(bundled_model_path()).encode(), params)
context = text_context(model, n_ubatch=8)
media = mtmd.mtmd_init_from_file(str(projector).encode(), model, media_params())
vision = Vision(model, context, media, llama.llama_model_get_vocab(model),
                mtmd.mtmd_helper_init_opt_default())
with bitmap_of(vision, png_bytes(16, 16, RED)) as bitmap, \\
        chunks_of(vision, vision.prompt(), [bitmap]) as chunks:
    for helper_batch in (8, 512):
        vision.forget()
        n_past = llama.llama_pos(0)
        result = mtmd.mtmd_helper_eval_chunks(
            media, context, chunks, 0, 0, helper_batch, True, ctypes.byref(n_past))
        print("batch", helper_batch, "result", result, flush=True)
"""


def test_an_image_larger_than_the_micro_batch_aborts_whole(tmp_path: Path) -> None:
    """Gemma 3 decodes an image's tokens with causal attention off, and llama.cpp asserts a
    non-causal batch fits one micro-batch (n_ubatch): decoded in pieces of n_ubatch (the
    helper's n_batch) it goes through, each piece seeing only those before it; handed over
    whole, the process aborts. Run in a child process for that reason."""
    probe = [sys.executable, "-c", _SMALL_UBATCH, str(tmp_path / "mmproj.gguf")]
    environment = {**os.environ, "GGML_NO_BACKTRACE": "1"}  # ggml would run gdb on abort
    result = subprocess.run(
        probe, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert "batch 8 result 0" in result.stdout, result.stderr[-2000:]
    assert "batch 512" not in result.stdout
    assert result.returncode == -signal.SIGABRT
    assert "non-causal attention requires n_ubatch >= n_tokens" in result.stderr
