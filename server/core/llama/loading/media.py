"""Images and sounds in a prompt, through the model's multimodal projector (`--mmproj`):
llama.cpp's libmtmd, as llama-cpp-python 0.3.36 binds it (`llama_cpp.mtmd_cpp`). What the calls
do and how they fail was measured first: docs/notes/mtmd-findings.md.

A request's prompt holds MEDIA_MARKER where each of its media items stands (the dialect put it
there); `Projector.read` turns prompt and items into tokens: the text's own, and for each item
as many stand-in ids as the item takes positions. A stand-in is negative (no real token is),
derived from the item's SHA-256 and its place in the item, so a cached prefix matches only the
same image at the same place and never a part of one. The engine decodes text as always and
each item in a decode of its own (`Projector.decode`): the projector's embeddings are read with
causal attention off, which llama.cpp sets for the whole context, so no other sequence's tokens
may share that decode.

Supported: projectors whose items take one position per token (Gemma 3, SmolVLM, LLaVA,
Pixtral, InternVL, audio encoders...). Those with 2-D positions (Qwen-VL's M-RoPE) are refused
at load with a line saying so: a position would no longer be a token's index in the prompt,
which the engine's slots and prefix reuse rely on.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import tempfile
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp as llama
import numpy as np
from llama_cpp import mtmd_cpp as mtmd

from server.core.scheduling.engine import EngineError, MediaError
from server.core.types import (
    MAX_DECODED_IMAGE_PIXELS,
    MEDIA_MARKER,
    GenerationRequest,
    MediaInput,
)

logger = logging.getLogger(__name__)

_GGML_LOG_LEVEL_ERROR = 4
_recent_errors: list[str] = []


def _keep_errors(level: int, text: bytes, _user_data: Any) -> None:
    """libmtmd's log: its errors are kept (the last few) to say why a load or an item failed;
    the rest is dropped, as llama.cpp's own chatter is (native.quiet_llama_logs)."""
    if level == _GGML_LOG_LEVEL_ERROR:
        # One line each: a message may carry its own hint after a line break.
        _recent_errors.extend(text.decode("utf-8", errors="replace").strip().splitlines())
        del _recent_errors[:-8]


# Module level: libmtmd keeps the C pointer for the life of the process.
_MTMD_LOG = llama.llama_log_callback(_keep_errors)
_NO_CALLBACK = mtmd.mtmd_helper_post_decode_callback()  # NULL (None is refused by ctypes)


def _last_error(fallback: str) -> str:
    reasons = [line.strip() for line in _recent_errors if line.strip()]
    reasons = [line for line in reasons if not line.startswith("hint")]
    _recent_errors.clear()
    return reasons[-1] if reasons else fallback


@dataclass
class MediaSpan:
    """One item's place in a prompt's tokens: where it starts, how many it takes, its chunk,
    and its embeddings being computed (Projector.encode_later)."""

    start: int
    length: int
    chunk: Any  # mtmd_input_chunk_p, owned by MediaPrompt.chunks
    encoded: Future[Any] | None = None  # the embeddings (a numpy array), or None: failed

    @property
    def ready(self) -> bool:
        return self.encoded is None or self.encoded.done()


@dataclass
class MediaPrompt:
    """A prompt read with its media: the tokens (stand-ins for the items) and each item's
    span; `free()` once the sequence is done with it."""

    tokens: list[int]
    spans: list[MediaSpan] = field(default_factory=list)
    chunks: Any = None  # mtmd_input_chunks_p

    def span_at(self, position: int) -> MediaSpan | None:
        return next((span for span in self.spans if span.start == position), None)

    def next_start(self, position: int) -> int:
        """Where the first item at or after `position` starts (the prompt's end if none)."""
        starts = [span.start for span in self.spans if span.start >= position]
        return min(starts, default=len(self.tokens))

    def whole_items(self, keep: int) -> int:
        """`keep` moved back to the start of an item it would cut in two."""
        for span in self.spans:
            if span.start < keep < span.start + span.length:
                return span.start
        return keep

    def waiting(self, position: int) -> MediaSpan | None:
        """The item at `position` when its embeddings are still being computed."""
        span = self.span_at(position)
        return span if span is not None and not span.ready else None

    def free(self) -> None:
        """Free the chunks, once no encode still reads them (one not started is dropped)."""
        for span in self.spans:
            if span.encoded is not None and not span.encoded.cancel():
                wait([span.encoded])
        if self.chunks is not None:
            mtmd.mtmd_input_chunks_free(self.chunks)
            self.chunks = None


class Projector:
    """The loaded projector; reads prompts with media and decodes their items."""

    def __init__(self, handle: Any, path: Path, width: int) -> None:
        self._handle = handle
        self.path = path
        self._width = width  # the model's input embedding width: each token's floats
        # One encode at a time (the projector has one output buffer), on a thread of its own:
        # an image's embeddings are computed while other sequences decode (libmtmd's graph
        # and buffers are its own; measured: both give what they give alone).
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hearth-media")
        self.modalities = frozenset(
            name
            for name, has in (
                ("vision", mtmd.mtmd_support_vision(handle)),
                ("audio", mtmd.mtmd_support_audio(handle)),
            )
            if has
        )
        self._options = mtmd.mtmd_helper_init_opt_default()
        # Bytes stb_image cannot read would go to ffprobe/ffmpeg as a video: an empty folder
        # for their programs keeps any process from being started for a client's bytes.
        self._no_programs = tempfile.TemporaryDirectory(prefix="hearth-no-ffmpeg-")
        self._options.video_params.ffmpeg_bin_dir = self._no_programs.name.encode()

    @classmethod
    def load(
        cls, path: Path, model: Any, *, threads: int, on_gpu: bool, tokens: tuple[int, int]
    ) -> Projector:
        """Load `path` for `model`; EngineError with llama.cpp's reason when it cannot."""
        if not path.is_file():
            raise EngineError(f"--mmproj {path}: no such file")
        mtmd.mtmd_helper_log_set(_MTMD_LOG, None)
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = on_gpu
        params.n_threads = threads
        params.print_timings = False
        params.media_marker = MEDIA_MARKER.encode()
        params.image_min_tokens, params.image_max_tokens = tokens
        handle = mtmd.mtmd_init_from_file(str(path).encode(), model, params)
        if not handle:
            reason = _last_error("llama.cpp could not load it as a projector")
            raise EngineError(f"--mmproj {path.name}: {reason}")
        if mtmd.mtmd_decode_use_mrope(handle):
            mtmd.mtmd_free(handle)
            raise EngineError(
                f"--mmproj {path.name}: this projector gives its items 2-D positions "
                "(M-RoPE, Qwen-VL's kind), which Hearth does not serve yet"
            )
        return cls(handle, path, int(llama.llama_model_n_embd_inp(model)))

    def read(self, request: GenerationRequest, add_bos: bool) -> MediaPrompt:
        """The request's prompt with its media as tokens; MediaError (the client's fault, a
        400) saying what is wrong with an item: the edge checked the bytes, but llama.cpp may
        still refuse them."""
        _check_kinds(request.media, self.modalities, self.path.name)
        bitmaps = [self._bitmap(item, index) for index, item in enumerate(request.media)]
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            self._tokenize(chunks, request, add_bos, bitmaps)
            return _media_prompt(chunks)
        except BaseException:
            mtmd.mtmd_input_chunks_free(chunks)
            raise
        finally:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)

    def encode_later(self, prompt: MediaPrompt, position: int) -> None:
        """Start computing the embeddings of each item from `position` on not started yet,
        in turn, on the projector's thread."""
        for span in prompt.spans:
            if span.start >= position and span.encoded is None:
                span.encoded = self._encoder.submit(self._encode, span.chunk)

    def decode(self, span: MediaSpan, context: Any, seq_id: int, batch_size: int) -> bool:
        """Decode the item's embeddings (waiting for them if need be) into `seq_id` at its
        span's place, in a decode of its own; False when llama.cpp fails (said on the
        console)."""
        embeddings = self._encode(span.chunk) if span.encoded is None else span.encoded.result()
        if embeddings is None:
            return False
        n_past = llama.llama_pos(span.start)
        status = mtmd.mtmd_helper_decode_image_chunk(
            self._handle, context, span.chunk,
            embeddings.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
            span.start, seq_id, batch_size, ctypes.byref(n_past), _NO_CALLBACK, None,
        )  # fmt: skip
        if status != 0:
            logger.error("Reading an image failed: %s", _last_error(f"status {status}"))
        return bool(status == 0)

    def close(self) -> None:
        self._encoder.shutdown(wait=True, cancel_futures=True)
        if self._handle is not None:
            mtmd.mtmd_free(self._handle)
            self._handle = None
        self._no_programs.cleanup()

    def _encode(self, chunk: Any) -> Any:
        """The chunk's embeddings, copied out of the projector's buffer (the next encode
        overwrites it); None when llama.cpp fails."""
        status = mtmd.mtmd_encode_chunk(self._handle, chunk)
        if status != 0:
            logger.error("Encoding an image failed: %s", _last_error(f"status {status}"))
            return None
        values = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk)) * self._width
        output = mtmd.mtmd_get_output_embd(self._handle)
        return np.ctypeslib.as_array(output, shape=(values,)).copy()

    def _bitmap(self, item: MediaInput, index: int) -> Any:
        if item.width * item.height > MAX_DECODED_IMAGE_PIXELS:  # not scaled at the edge
            raise MediaError(
                f"media item {index + 1}: the image is {item.width}\u00d7{item.height} "
                "pixels, too large to decode here"
            )
        data = (ctypes.c_uint8 * len(item.data)).from_buffer_copy(item.data)
        bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(
            self._handle, data, len(item.data), False, self._options
        )
        if not bitmap:
            reason = _last_error("llama.cpp could not read it")
            raise MediaError(f"media item {index + 1} ({item.mime or item.kind}): {reason}")
        return bitmap

    def _tokenize(
        self, chunks: Any, request: GenerationRequest, add_bos: bool, bitmaps: list[Any]
    ) -> None:
        found = request.prompt.count(MEDIA_MARKER)
        if found != len(bitmaps):
            raise MediaError(
                f"the prompt places {found} media items but the request has {len(bitmaps)}"
            )
        text = mtmd.mtmd_input_text()
        encoded = request.prompt.encode()
        text.text, text.text_len = encoded, len(encoded)
        text.add_special, text.parse_special = add_bos, True
        array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
        status = mtmd.mtmd_tokenize(self._handle, chunks, ctypes.byref(text), array, len(bitmaps))
        if status != 0:
            raise MediaError(_last_error(f"llama.cpp could not read the media (status {status})"))


def _check_kinds(items: Sequence[MediaInput], modalities: frozenset[str], name: str) -> None:
    wanted = {"image": "vision", "audio": "audio"}
    for item in items:
        if wanted.get(item.kind) not in modalities:
            raise MediaError(f"{item.kind} input is not supported by this model's projector {name}")


def _media_prompt(chunks: Any) -> MediaPrompt:
    """The tokens and spans of tokenized chunks (the chunks are the MediaPrompt's to free)."""
    prompt = MediaPrompt([], chunks=chunks)
    for index in range(mtmd.mtmd_input_chunks_size(chunks)):
        chunk = mtmd.mtmd_input_chunks_get(chunks, index)
        if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
            count = ctypes.c_size_t()
            tokens = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
            prompt.tokens.extend(int(tokens[i]) for i in range(count.value))
            continue
        length = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
        prompt.spans.append(MediaSpan(len(prompt.tokens), length, chunk))
        prompt.tokens.extend(stand_ins(mtmd.mtmd_input_chunk_get_id(chunk) or b"", length))
    last = prompt.spans[-1] if prompt.spans else None
    if last is not None and last.start + last.length == len(prompt.tokens):
        # An item's decode gives no logits: the reply's first token needs text after it.
        raise MediaError("the prompt must go on after its last media item")
    return prompt


def stand_ins(item_id: bytes, length: int) -> list[int]:
    """The ids standing for an item's `length` positions: negative (no token is), from its
    SHA-256 (`item_id`, as libmtmd names it) and each position's place in it."""
    digest = hashlib.sha256(item_id).digest()
    base = int.from_bytes(digest[:4], "little") & 0x3FFFFFFF
    return [-2 - ((base + offset) & 0x3FFFFFFF) for offset in range(length)]
