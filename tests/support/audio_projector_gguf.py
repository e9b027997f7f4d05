"""A tiny audio projector (mmproj GGUF) with random weights, for tests, and sounds to feed it.

No audio model can be downloaded here, so the tests build one, as tests/support/projector_gguf.py
builds a vision one: an Ultravox-style projector (`clip.projector_type` "ultravox"), the
simplest of llama.cpp's Whisper-based audio types to write. Its mel spectrogram is computed by
llama.cpp itself (tools/mtmd/mtmd-audio.cpp, `mtmd_audio_preprocessor_whisper`): the mel
filters are built in from `num_mel_bins`, the sample rate (16 kHz), the FFT size (400) and hop
(160) are fixed for the type, so the file carries no filters and no preprocessing keys. Read
from tools/mtmd/clip.cpp (`load_hparams`, `load_tensors`), clip-impl.h and
models/whisper-enc.cpp in the llama-cpp-python 0.3.36 sdist:

- keys: `clip.has_audio_encoder` (without it no audio context is made), `clip.projector_type`,
  and under `clip.audio.`: `embedding_length`, `feed_forward_length`, `block_count`,
  `attention.head_count`, `attention.layer_norm_epsilon`, `projection_dim` (informative),
  `num_mel_bins` (1..256) and, for ultravox, `projector.stack_factor`: all required, a missing
  one makes the load fail. The type fixes the tower's activation (GELU, erf form).
- tensors: the Whisper encoder's two 1-D convolutions (`a.conv1d.{1,2}`; the second halves the
  frames), learned positions (`a.position_embd`, at least 1500 rows: a 30-second window), then
  per block LayerNorms, attention (q and v with biases; k without: whisper-enc.cpp asserts
  it) and a GELU feed-forward; then Ultravox's projector: frames stacked `stack_factor` at a
  time, RMS norm x `mm.a.norm_pre`, `mm.a.mlp.1` to 2 x hidden, SwiGLU, RMS norm x
  `mm.a.norm_mid`, `mm.a.mlp.2` to the text model's width (mtmd refuses another width).
- no begin/end markers: mtmd adds none around an Ultravox sound (Voxtral's and Qwen2-Audio's
  add text markers the bundled model does not have), so the sound is only its tokens.

Whisper-style projectors read every sound in windows of 30 seconds: llama.cpp pads the sound
with 30 s of silence and keeps each full window of 3000 mel frames (a shorter sound is one
window, mostly silence). The convolution halves a window to 1500 frames, the stacking divides
by `stack_factor`, so each window costs 1500 / stack_factor media tokens: 30 with the
defaults. Encoding a window through one block of 32 channels takes a few tens of milliseconds.
"""

from __future__ import annotations

import io
import math
import struct
import wave
from pathlib import Path

import gguf
import numpy as np
import pytest

from tests.support.projector_gguf import text_embedding_width

# llama.cpp's fixed framing for Whisper-style audio (clip.cpp, load_hparams for ultravox).
SAMPLE_RATE = 16_000
HOP = 160
WINDOW_SECONDS = 30
# Mel frames in one window (mtmd-audio.cpp: frames_per_chunk), halved by the second convolution.
FRAMES_PER_WINDOW = WINDOW_SECONDS * SAMPLE_RATE // HOP
POSITIONS_PER_WINDOW = FRAMES_PER_WINDOW // 2


def media_tokens_per_sound(seconds: float, stack_factor: int = 50) -> int:
    """The tokens a sound of `seconds` costs: one set per full window of mel frames, counted
    after llama.cpp's 30 s of padding (a remainder shorter than a window is dropped)."""
    frames = int(seconds * SAMPLE_RATE + WINDOW_SECONDS * SAMPLE_RATE) // HOP + 1
    windows = frames // FRAMES_PER_WINDOW
    return windows * math.ceil(POSITIONS_PER_WINDOW / stack_factor)


def write_audio_projector(
    path: Path,
    text_model_path: Path,
    *,
    mel_bins: int = 16,
    layers: int = 1,
    width: int = 32,
    heads: int = 2,
    stack_factor: int = 50,
    hidden: int = 64,
    seed: int = 0,
    n_embd: int | None = None,
) -> Path:
    """Writes an ultravox-type mmproj to `path`; `n_embd` replaces the text model's width as
    the projector's output width (a projector that does not match the model)."""
    if POSITIONS_PER_WINDOW % stack_factor or hidden % 2:
        raise ValueError("stack_factor must divide 1500 and hidden must be even (SwiGLU)")
    output_width = n_embd if n_embd is not None else text_embedding_width(text_model_path)
    writer = gguf.GGUFWriter(str(path), "clip")
    # The keys clip.cpp's loader reads for an audio encoder; all of these are required.
    writer.add_string("general.type", "mmproj")
    writer.add_uint32("general.file_type", 0)  # all F32
    writer.add_string("clip.projector_type", "ultravox")
    writer.add_bool("clip.has_audio_encoder", True)
    writer.add_uint32("clip.audio.num_mel_bins", mel_bins)
    writer.add_uint32("clip.audio.embedding_length", width)
    writer.add_uint32("clip.audio.feed_forward_length", 2 * width)
    writer.add_uint32("clip.audio.block_count", layers)
    writer.add_uint32("clip.audio.attention.head_count", heads)
    writer.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32("clip.audio.projection_dim", output_width)
    writer.add_uint32("clip.audio.projector.stack_factor", stack_factor)
    rng = np.random.default_rng(seed)
    tensors = _encoder(rng, mel_bins=mel_bins, layers=layers, width=width)
    tensors |= _projector(
        rng, stacked=width * stack_factor, hidden=hidden, output_width=output_width
    )
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _normal(rng: np.random.Generator, *shape: int, scale: float = 0.2) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _ones_ish(rng: np.random.Generator, size: int) -> np.ndarray:
    return (1.0 + rng.standard_normal(size) * 0.05).astype(np.float32)


def _encoder(
    rng: np.random.Generator, *, mel_bins: int, layers: int, width: int
) -> dict[str, np.ndarray]:
    """The Whisper encoder. Numpy shapes are ggml's `ne` reversed: (rows, cols) is ne = [cols,
    rows]; a conv1d kernel ne = [kernel, in, out]."""
    tensors = {
        "a.conv1d.1.weight": _normal(rng, width, mel_bins, 3),
        # ne = [1, width]: broadcast over the frames (as llama.cpp's converter stores it)
        "a.conv1d.1.bias": _normal(rng, width, 1, scale=0.02),
        "a.conv1d.2.weight": _normal(rng, width, width, 3, scale=0.1),
        "a.conv1d.2.bias": _normal(rng, width, 1, scale=0.02),
        # ne = [width, 1500]: one learned position per frame of a window
        "a.position_embd.weight": _normal(rng, POSITIONS_PER_WINDOW, width, scale=0.02),
    }
    for block in range(layers):
        prefix = f"a.blk.{block}"
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensors[f"{prefix}.{part}.weight"] = _normal(rng, width, width)
            if part != "attn_k":  # Whisper's key projection has no bias
                tensors[f"{prefix}.{part}.bias"] = _normal(rng, width, scale=0.02)
        for norm in ("ln1", "ln2"):
            tensors[f"{prefix}.{norm}.weight"] = _ones_ish(rng, width)
            tensors[f"{prefix}.{norm}.bias"] = _normal(rng, width, scale=0.02)
        tensors[f"{prefix}.ffn_up.weight"] = _normal(rng, 2 * width, width)
        tensors[f"{prefix}.ffn_up.bias"] = _normal(rng, 2 * width, scale=0.02)
        tensors[f"{prefix}.ffn_down.weight"] = _normal(rng, width, 2 * width)
        tensors[f"{prefix}.ffn_down.bias"] = _normal(rng, width, scale=0.02)
    return tensors


def _projector(
    rng: np.random.Generator, *, stacked: int, hidden: int, output_width: int
) -> dict[str, np.ndarray]:
    """Ultravox's projector, without biases (whisper-enc.cpp reads none)."""
    return {
        "mm.a.norm_pre.weight": _ones_ish(rng, stacked),
        "mm.a.mlp.1.weight": _normal(rng, hidden, stacked, scale=0.05),
        "mm.a.norm_mid.weight": _ones_ish(rng, hidden // 2),
        # ne = [hidden / 2, output_width]: clip_n_mmproj_embd reads ne[1] as the output width.
        # Entries of about 3, above the text's own embeddings (about 1): most of a window is
        # llama.cpp's padding, the same for every sound, and the rest must still move the
        # next token clearly (measured: two sounds of a second, 2 to 3 nats on a likely token)
        "mm.a.mlp.2.weight": _normal(rng, output_width, hidden // 2, scale=0.5),
    }


def tone_wav(
    frequency: float,
    seconds: float = 1.0,
    *,
    rate: int = SAMPLE_RATE,
    noise: float = 0.0,
    seed: int = 0,
) -> bytes:
    """A mono 16-bit WAV of a sine at `frequency` Hz (0: silence), with white noise of
    amplitude `noise` (0..1) added, written by the `wave` module."""
    times = np.arange(int(seconds * rate)) / rate
    signal = 0.5 * np.sin(2 * math.pi * frequency * times)
    signal += noise * np.random.default_rng(seed).uniform(-1, 1, times.size)
    samples = (np.clip(signal, -1, 1) * 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(samples.tobytes())
    return out.getvalue()


def wav_data_size(wav: bytes) -> int:
    """The byte count the WAV's `data` chunk header claims (for cutting one short)."""
    at = wav.index(b"data")
    return int(struct.unpack("<I", wav[at + 4 : at + 8])[0])


def session_audio_projector(factory: pytest.TempPathFactory, text_model_path: Path) -> Path:
    """The default tiny audio projector for `text_model_path`, written once per test session
    under its base temporary folder (each test module's server loads the same file)."""
    path = factory.getbasetemp() / "audio-mmproj" / "tiny-audio-mmproj.gguf"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        partial = path.with_suffix(".partial")
        write_audio_projector(partial, text_model_path)
        partial.replace(path)  # whole or absent: a failed write is not read as a projector
    return path
