"""How much device memory a model needs for a context, and how many layers fit (auto).

An estimate from the GGUF header alone (no loading), used by the launcher's GPU Layers "Auto"
and by `--gpulayers -1` (KoboldCpp's autofit): the repeating layers' weights as stored, the
output layer (the token embedding again when the model ties them: llama.cpp then keeps one
copy on the CPU for the input and one on the device for the output), an f16 KV cache for the
whole context, and llama.cpp's compute buffer for one batch. Like KoboldCpp's it is an
estimate ("often inaccurate, set yourself"), so it leaves headroom.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the header reader imports numpy (via gguf); the estimate itself does not
    from server.models.gguf import GGUFSummary

_KV_BYTES_PER_VALUE = 2  # llama.cpp's default f16 KV cache
_FLOAT_BYTES = 4
# Kept free on the device for the driver, other programs and the estimate's error.
HEADROOM_BYTES = 256 * 2**20
MIB = 2**20


@dataclass(frozen=True)
class MemoryEstimate:
    layers: int  # repeating layers; llama.cpp counts one more for the output layer
    layer_bytes: int  # mean weights of one repeating layer
    output_bytes: int  # the output layer's weights (and its norm)
    kv_layer_bytes: int  # one layer's KV cache for the whole context
    compute_bytes: int  # the compute buffer for one batch
    logits_bytes: int  # the part of the compute buffer for the output layer's logits
    file_bytes: int = 0  # the GGUF file: all weights, as llama.cpp maps them on the CPU

    @property
    def all_layers(self) -> int:
        """The `n_gpu_layers` that puts everything on the device (llama.cpp: layers + 1)."""
        return self.layers + 1

    def device_bytes(self, gpu_layers: int) -> int:
        """Device memory for `gpu_layers` offloaded (the last ones, as llama.cpp chooses)."""
        repeating = min(max(gpu_layers, 0), self.layers)
        if repeating == 0:
            return 0
        total = repeating * (self.layer_bytes + self.kv_layer_bytes) + self.compute_bytes
        if gpu_layers > self.layers:
            total += self.output_bytes + self.logits_bytes
        return total

    @property
    def cpu_bytes(self) -> int:
        """Memory for running everything on the CPU: weights, KV cache, compute buffer."""
        kv = self.layers * self.kv_layer_bytes
        return self.file_bytes + kv + self.compute_bytes + self.logits_bytes


def estimate_memory(summary: GGUFSummary, context: int, batch: int) -> MemoryEstimate:
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
    kv_layer = context * kv_heads * (key_length + value_length) * _KV_BYTES_PER_VALUE
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
