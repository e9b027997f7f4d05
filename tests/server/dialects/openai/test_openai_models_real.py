"""/v1/models with the official `openai` client: the real model's entry with what its GGUF
header says (llama-server's `meta` field names)."""

from __future__ import annotations

import openai

from server.models.files import resolve_model_path
from server.models.gguf import gguf_summary
from tests.support.servers import RunningServer


def test_models_list_carries_the_gguf_metadata(hearth: RunningServer) -> None:
    client = openai.OpenAI(base_url=f"{hearth.base_url}/v1", api_key="unused")
    models = client.models.list().data
    assert len(models) == 1
    entry = models[0]
    path = resolve_model_path(None)
    assert entry.id == "gemma-3-270m-q4_k_m" and entry.owned_by == "hearth"
    assert entry.created == path.stat().st_mtime_ns // 1_000_000_000
    meta = (entry.model_extra or {})["meta"]
    assert meta == {
        "n_vocab": 262144,
        "n_ctx_train": 32768,
        "n_embd": 640,
        "n_params": gguf_summary(path).parameter_count,
        "size": path.stat().st_size,
        "architecture": "gemma3",
        "quantization": "Q4_K_M",
        "chat_template": False,
    }
