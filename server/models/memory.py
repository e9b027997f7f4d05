"""How much device memory a model needs for a context, and how many layers fit (auto).

An estimate from the GGUF header alone (no loading), used by the launcher's GPU Layers "Auto"
and by `--gpulayers -1` (KoboldCpp's autofit): the repeating layers' weights as stored, the
output layer (the token embedding again when the model ties them: llama.cpp then keeps one
copy on the CPU for the input and one on the device for the output), the KV cache for the
whole context in its type (f16 unless --quantkv or -ctk/-ctv say otherwise; on the device
unless --lowvram keeps it in system memory), and llama.cpp's compute buffer for one batch.
Like KoboldCpp's it is an estimate ("often inaccurate, set yourself"), so it leaves headroom.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the header reader imports numpy (via gguf); the estimate itself does not
    from server.models.gguf import GGUFSummary

# Bytes per cached value of each KV cache type: ggml's block size over its values per block
# (q8_0: 34 bytes for 32 values).
KV_BYTES_PER_VALUE = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}
_FULL_PRECISION = frozenset({"f32", "f16", "bf16"})
_FLOAT_BYTES = 4
# Kept free on the device for the driver, other programs and the estimate's error.
HEADROOM_BYTES = 256 * 2**20
MIB = 2**20


@dataclass(frozen=True)
class KvCacheLayout:
    """The KV cache's types and where it lives: what the estimate needs of the settings."""

    type_k: str = "f16"
    type_v: str = "f16"
    on_device: bool = True  # False: --lowvram keeps it in system memory

    @property
    def value_bytes(self) -> tuple[float, float]:
        return KV_BYTES_PER_VALUE[self.type_k], KV_BYTES_PER_VALUE[self.type_v]


def kv_cache_layout(
    type_k: str, type_v: str, flash_attention: str, on_device: bool = True
) -> tuple[KvCacheLayout, str | None]:
    """The KV cache llama.cpp can make of what was asked, and why it differs when it does:
    a quantized V cache needs flash attention, so with it off V stays f16 (KoboldCpp's way)
    rather than the context failing."""
    if flash_attention == "off" and type_v not in _FULL_PRECISION:
        note = (
            f"a {type_v} V cache needs flash attention, which is off: the V cache stays f16 "
            f"(K is {type_k}); use --flash-attn on or auto to quantize it"
        )
        return KvCacheLayout(type_k, "f16", on_device), note
    return KvCacheLayout(type_k, type_v, on_device), None


@dataclass(frozen=True)
class MemoryEstimate:
    layers: int  # repeating layers; llama.cpp counts one more for the output layer
    layer_bytes: int  # mean weights of one repeating layer
    output_bytes: int  # the output layer's weights (and its norm)
    kv_layer_bytes: int  # one layer's KV cache for the whole context
    compute_bytes: int  # the compute buffer for one batch
    logits_bytes: int  # the part of the compute buffer for the output layer's logits
    file_bytes: int = 0  # the GGUF file: all weights, as llama.cpp maps them on the CPU
    kv_on_device: bool = True  # False: --lowvram, the KV cache stays in system memory

    @property
    def all_layers(self) -> int:
        """The `n_gpu_layers` that puts everything on the device (llama.cpp: layers + 1)."""
        return self.layers + 1

    def device_bytes(self, gpu_layers: int) -> int:
        """Device memory for `gpu_layers` offloaded (the last ones, as llama.cpp chooses)."""
        repeating = min(max(gpu_layers, 0), self.layers)
        if repeating == 0:
            return 0
        kv = self.kv_layer_bytes if self.kv_on_device else 0
        total = repeating * (self.layer_bytes + kv) + self.compute_bytes
        if gpu_layers > self.layers:
            total += self.output_bytes + self.logits_bytes
        return total

    @property
    def cpu_bytes(self) -> int:
        """Memory for running everything on the CPU: weights, KV cache, compute buffer."""
        kv = self.layers * self.kv_layer_bytes
        return self.file_bytes + kv + self.compute_bytes + self.logits_bytes


def estimate_memory(
    summary: GGUFSummary, context: int, batch: int, kv: KvCacheLayout | None = None
) -> MemoryEstimate:
    """`kv`: the KV cache's types and place (default: f16, on the device)."""
    kv = kv or KvCacheLayout()

    def number(key: str, default: int) -> int:
        value = summary.architecture_number(key)
        return default if value is None else value

    layers = max(number("block_count", 1), 1)
    embedding = number("embedding_length", 0)
    heads = max(number("attention.head_count", 1), 1)
    kv_heads = number("attention.head_count_kv", heads)
    key_length = number("attention.key_length", embedding // heads)
    value_length = number("attention.value_length", embedding // heads)
    sizes = {tensor.name: tensor.n_bytes or 0 for tensor in summary.tensors}
    layer_total = sum(size for name, size in sizes.items() if name.startswith("blk."))
    output = sizes.get("output.weight", sizes.get("token_embd.weight", 0))
    output += sizes.get("output_norm.weight", 0)
    key_bytes, value_bytes = kv.value_bytes
    kv_layer = int(context * kv_heads * (key_length * key_bytes + value_length * value_bytes))
    # Activations of one batch (a few embedding-wide rows per token) and the attention scores
    # of one batch against the whole context; the logits only where the output layer runs.
    compute = batch * _FLOAT_BYTES * (8 * embedding + heads * context)
    return MemoryEstimate(
        layers=layers,
        layer_bytes=layer_total // layers,
        output_bytes=output,
        kv_layer_bytes=kv_layer,
        compute_bytes=compute,
        logits_bytes=batch * summary.vocabulary_size * _FLOAT_BYTES,
        file_bytes=summary.file_size,
        kv_on_device=kv.on_device,
    )


def auto_gpu_layers(estimate: MemoryEstimate, free_bytes: int) -> int:
    """The most layers (llama.cpp's count, output layer included) that fit in `free_bytes`,
    keeping HEADROOM_BYTES free."""
    budget = free_bytes - HEADROOM_BYTES
    if estimate.device_bytes(estimate.all_layers) <= budget:
        return estimate.all_layers
    low, high = 0, estimate.layers  # device_bytes grows with the count: bisect
    while low < high:
        middle = (low + high + 1) // 2
        if estimate.device_bytes(middle) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def available_memory() -> int | None:
    """The memory the system can give a new program now (Linux's MemAvailable), if known."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def mib(count: int) -> str:
    return f"{count / MIB:,.0f} MiB" if count < 10 * 2**30 else f"{count / 2**30:.1f} GiB"
