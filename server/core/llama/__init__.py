"""llama.cpp behind Hearth's Engine protocol: the only package that imports llama_cpp.

- `model.py`: loading a GGUF and its context, the tokenizer, fitting a prompt to a slot.
- `slots.py`: the KV cache's sequences, prefix reuse and ContextShift.
- `sampler.py`: each request's llama.cpp sampler chain (grammar, penalties, draw).
- `engine.py`: `LlamaCppEngine`, batching every active request into one decode per step.
- `embedder.py`: embeddings, in a context of their own (several inputs per decode).
- `native.py`: the ctypes extras (persistent thread pool, with a start-up check of the
  struct layout it assumes) and llama.cpp's log and progress callbacks.
"""

from server.core.llama.engine import LlamaCppEngine
from server.models.files import model_display_name

__all__ = ["LlamaCppEngine", "model_display_name"]
