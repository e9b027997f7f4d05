"""Real LoRA adapter GGUFs for the bundled model, written with the `gguf` package as llama.cpp's
adapter loader reads them (src/llama-adapter.cpp): `general.type` "adapter", `adapter.type`
"lora", `adapter.lora.alpha`, the model's `general.architecture`, and for each adapted weight
`<name>.lora_a` (ggml shape [in, rank]) and `<name>.lora_b` ([rank, out]), where the weight is
[in, out]. Random f32 values from a fixed seed, large enough to move the logits clearly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from server.models.gguf import gguf_summary

RANK = 8


def write_lora(
    path: Path,
    base: Path,
    *,
    targets: tuple[str, ...] = ("ffn_up",),
    strength: float = 0.25,
    seed: int = 0,
    architecture: str | None = None,
    shrink: int = 0,
    task_name: str | None = None,
) -> Path:
    """An adapter for every block's `targets` weights of the model at `base` (whose tensor
    shapes it reads). `architecture`: another than the model's (a LoRA for another model);
    `shrink`: make each adapted weight's output this much narrower than the model's (right
    architecture, wrong shapes); `task_name`: its `adapter.lora.task_name`, which llama-server
    lists. At the default strength, scale 1 turns the bundled model's likeliest next token
    after "The capital of France is" from " the" to another."""
    summary = gguf_summary(base)
    writer = GGUFWriter(path, architecture or summary.architecture)
    writer.add_type("adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(RANK))  # alpha / rank = 1: scale as given
    if task_name is not None:
        writer.add_string("adapter.lora.task_name", task_name)
    rng = np.random.default_rng(seed)
    for tensor in summary.tensors:
        kind = tensor.name.split(".")[-2] if tensor.name.startswith("blk.") else ""
        if kind not in targets or not tensor.name.endswith(".weight"):
            continue
        inputs, outputs = tensor.shape
        outputs -= shrink
        # numpy's shapes are ggml's reversed: lora_a is [in, rank] in ggml, (rank, in) here.
        lora_a = rng.normal(0.0, 1.0 / np.sqrt(inputs), (RANK, inputs)).astype(np.float32)
        lora_b = rng.normal(0.0, strength, (outputs, RANK)).astype(np.float32)
        writer.add_tensor(f"{tensor.name}.lora_a", lora_a)
        writer.add_tensor(f"{tensor.name}.lora_b", lora_b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
