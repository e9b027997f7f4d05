"""Small GGUF files for tests: a tiny valid one, and the head of a real one."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np


def write_tiny_gguf(path: Path, chat_template: str | None = "{{ messages }}") -> Path:
    """A valid two-tensor GGUF of a few hundred bytes (llama architecture, F32)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(2048)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tensor("tok.weight", np.ones((8, 16), dtype=np.float32))
    writer.add_tensor("out.weight", np.ones((4,), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def copy_head(source: Path, target: Path, size: int) -> Path:
    with open(source, "rb") as reader, open(target, "wb") as writer:
        remaining = size
        while remaining:
            chunk = reader.read(min(remaining, 1 << 20))
            writer.write(chunk)
            remaining -= len(chunk)
    return target
