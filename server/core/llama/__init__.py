"""llama.cpp behind Hearth's Engine protocol: the only package that imports llama_cpp.

- `engine.py`: `LlamaCppEngine`, every active request batched into one decode per step;
  `card.py`: a model's tokenizer and checks for planning requests; `companions.py`: what loads
  beside a model (its draft model, its projector) and a prompt fitted with its media.
- `loading/` (a GGUF into llama.cpp, devices, RPC, LoRA, the projector), `sampling/` (sampler
  chains, JSON grammars, drawing a token), `sequences/` (requests in slots, the KV cache, the
  tool decision), `speculation/` (n-gram and draft-model drafting), `embedding/` (embeddings,
  pooling, reranking).

May import: llama_cpp and numpy, the rest of `server.core`, `server.devices`, `server.models`,
`server.base`. Nothing outside it imports llama_cpp.
"""

from server.core.llama.engine import LlamaCppEngine
from server.models.files import model_display_name

__all__ = ["LlamaCppEngine", "model_display_name"]
