"""A tiny Gemma 3 multimodal projector (mmproj GGUF) with random weights, for tests.

No vision model can be downloaded here, so the tests build one: a SigLIP-style vision tower
(`clip.projector_type` "gemma3") shrunk (by default) to one block of 32 channels, whose output
width matches the text model's embedding width. llama.cpp's `clip` loader
(vendor/llama.cpp/tools/mtmd/clip.cpp in the llama-cpp-python 0.3.36 sdist) reads it like a
real Gemma 3 projector; docs/notes/mtmd-findings.md lists the keys and shapes and why.

The image is resized to `image_size` square, cut into (image_size / patch_size)^2 patches,
and the gemma3 projector average-pools them `n_merge` x `n_merge`, so an image costs
(image_size / patch_size / n_merge)^2 media tokens: 4 with the defaults.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import BinaryIO

import gguf
import numpy as np

# llama.cpp's gemma3 default pooling kernel (clip.cpp: hparams.n_merge = 4); the key
# clip.vision.projector.scale_factor overrides it, as in llama.cpp's own "tinygemma3".
_DEFAULT_N_MERGE = 4


def text_embedding_width(text_model_path: Path) -> int:
    """The text model's embedding width (`<arch>.embedding_length`), which mtmd requires the
    projector's output width to equal. Read from the GGUF header by hand: gguf.GGUFReader
    maps every tensor and array and takes ~20 s on the bundled model's 262k-token vocabulary."""
    values = _header_values(text_model_path)
    arch = values.get("general.architecture")
    width = values.get(f"{arch}.embedding_length")
    if not isinstance(width, int):
        raise ValueError(f"{text_model_path}: no {arch}.embedding_length in the GGUF header")
    return width


# GGUF value types (gguf.GGUFValueType): their struct formats; 8 is a string, 9 an array.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}
_SCALARS |= {11: "<q", 12: "<d"}


def _header_values(path: Path) -> dict[str, object]:
    """The header's scalar and string values (arrays are skipped)."""
    values: dict[str, object] = {}
    with open(path, "rb") as file:
        magic, _version, _tensors, kv_count = struct.unpack("<4sIQQ", file.read(24))
        if magic != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        for _ in range(kv_count):
            key = _read_string(file)
            (kind,) = struct.unpack("<I", file.read(4))
            values[key] = _read_value(file, kind)
    return values


def _read_string(file: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", file.read(8))
    return file.read(length).decode("utf-8", errors="replace")


def _read_value(file: BinaryIO, kind: int) -> object:
    if kind == 8:
        return _read_string(file)
    if kind == 9:
        item_kind, count = struct.unpack("<IQ", file.read(12))
        if item_kind == 8:
            for _ in range(count):
                (length,) = struct.unpack("<Q", file.read(8))
                file.seek(length, 1)
        else:
            file.seek(count * struct.calcsize(_SCALARS[item_kind]), 1)
        return None
    fmt = _SCALARS[kind]
    return struct.unpack(fmt, file.read(struct.calcsize(fmt)))[0]


def media_tokens_per_image(
    image_size: int, patch_size: int, n_merge: int = _DEFAULT_N_MERGE
) -> int:
    side = image_size // patch_size // n_merge
    return side * side


def write_projector(
    path: Path,
    text_model_path: Path,
    *,
    image_size: int = 32,
    patch_size: int = 4,
    layers: int = 1,
    width: int = 32,
    heads: int = 2,
    n_merge: int = _DEFAULT_N_MERGE,
    seed: int = 0,
    n_embd: int | None = None,
    f16: bool = False,
) -> Path:
    """Writes a gemma3-type mmproj to `path`. `n_embd` replaces the text model's width as the
    projector's output width (a projector that does not match the model); `f16` stores the
    layers' and the projection's matrices as F16 (the rest stays F32, as the converter does)."""
    patches_per_side = image_size // patch_size
    if image_size % patch_size or patches_per_side % n_merge:
        raise ValueError("image_size / patch_size must be a whole multiple of n_merge")
    output_width = n_embd if n_embd is not None else text_embedding_width(text_model_path)
    writer = gguf.GGUFWriter(str(path), "clip")
    _write_keys(
        writer,
        image_size=image_size,
        patch_size=patch_size,
        layers=layers,
        width=width,
        heads=heads,
        n_merge=n_merge,
        output_width=output_width,
        f16=f16,
    )
    tensors = _tensors(
        np.random.default_rng(seed),
        patch_size=patch_size,
        n_patches=patches_per_side * patches_per_side,
        layers=layers,
        width=width,
        output_width=output_width,
    )
    for name, array in tensors.items():
        # as llama.cpp's converter: the patch and position embeddings stay F32 (".embeddings.")
        matrix = array.ndim == 2 and name != "v.position_embd.weight"
        writer.add_tensor(name, array.astype(np.float16) if f16 and matrix else array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _write_keys(
    writer: gguf.GGUFWriter,
    *,
    image_size: int,
    patch_size: int,
    layers: int,
    width: int,
    heads: int,
    n_merge: int,
    output_width: int,
    f16: bool,
) -> None:
    # The keys clip.cpp's loader reads: those marked "required" throw when missing.
    writer.add_string("general.type", "mmproj")
    writer.add_uint32("general.file_type", 1 if f16 else 0)  # 1: mostly F16, 0: all F32
    writer.add_string("clip.projector_type", "gemma3")  # required
    writer.add_bool("clip.has_vision_encoder", True)  # else no vision context is made
    writer.add_bool("clip.use_gelu", True)  # SigLIP's gelu (the default is gelu_quick)
    writer.add_uint32("clip.vision.image_size", image_size)  # required
    writer.add_uint32("clip.vision.patch_size", patch_size)  # required
    writer.add_uint32("clip.vision.embedding_length", width)  # required
    writer.add_uint32("clip.vision.feed_forward_length", 2 * width)  # required
    writer.add_uint32("clip.vision.block_count", layers)  # required
    writer.add_uint32("clip.vision.attention.head_count", heads)  # required
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)  # required
    writer.add_uint32("clip.vision.projection_dim", output_width)  # required (informative)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])  # required, >= 3 values
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])  # required, >= 3 values
    if n_merge != _DEFAULT_N_MERGE:  # as llama.cpp's converter: only when not the default
        writer.add_uint32("clip.vision.projector.scale_factor", n_merge)


def _tensors(
    rng: np.random.Generator,
    *,
    patch_size: int,
    n_patches: int,
    layers: int,
    width: int,
    output_width: int,
) -> dict[str, np.ndarray]:
    """Numpy shapes are ggml's `ne` reversed: a (rows, cols) array is ne = [cols, rows]."""

    def normal(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def ones_ish(size: int) -> np.ndarray:
        return (1.0 + rng.standard_normal(size) * 0.05).astype(np.float32)

    tensors = {
        # conv2d kernel, ne = [patch, patch, 3, width]
        "v.patch_embd.weight": normal(width, 3, patch_size, patch_size),
        "v.patch_embd.bias": normal(width, scale=0.02),
        # ne = [width, n_patches]: one learned position per patch (no interpolation for gemma3)
        "v.position_embd.weight": normal(n_patches, width, scale=0.02),
    }
    for block in range(layers):
        prefix = f"v.blk.{block}"
        for part in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensors[f"{prefix}.{part}.weight"] = normal(width, width)
            tensors[f"{prefix}.{part}.bias"] = normal(width, scale=0.02)
        for norm in ("ln1", "ln2"):
            tensors[f"{prefix}.{norm}.weight"] = ones_ish(width)
            tensors[f"{prefix}.{norm}.bias"] = normal(width, scale=0.02)
        # up: ne = [width, 2*width]; down: ne = [2*width, width]. A down whose ne[0] equals the
        # width would be taken for a legacy file with up and down swapped.
        tensors[f"{prefix}.ffn_up.weight"] = normal(2 * width, width)
        tensors[f"{prefix}.ffn_up.bias"] = normal(2 * width, scale=0.02)
        tensors[f"{prefix}.ffn_down.weight"] = normal(width, 2 * width)
        tensors[f"{prefix}.ffn_down.bias"] = normal(width, scale=0.02)
    tensors["v.post_ln.weight"] = ones_ish(width)
    tensors["v.post_ln.bias"] = normal(width, scale=0.02)
    # The gemma3 projector: RMS norm over the pooled patches, then width -> text width.
    tensors["mm.soft_emb_norm.weight"] = ones_ish(width)  # ne = [width]
    # ne = [output_width, width]: clip_n_mmproj_embd reads ne[0] as the output width
    tensors["mm.input_projection.weight"] = normal(width, output_width)
    return tensors


def png_bytes(width: int, height: int, color: tuple[int, int, int]) -> bytes:
    """A solid-colour RGB PNG, written by hand (Pillow is not installed). The rows are
    compressed as they are made, so a large image costs little memory here."""
    row = b"\x00" + bytes(color) * width  # filter byte 0, then the pixels
    compressor = zlib.compressobj(6)
    rows_per_block = max(1, (1 << 22) // len(row))
    parts = []
    for first in range(0, height, rows_per_block):
        parts.append(compressor.compress(row * min(rows_per_block, height - first)))
    parts.append(compressor.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", b"".join(parts))
        + _png_chunk(b"IEND", b"")
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data)
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
