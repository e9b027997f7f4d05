"""llama.cpp behind Hearth's Engine protocol: the only package that imports llama_cpp.

- `model.py`: loading a GGUF and its context, the tokenizer, fitting a prompt to a slot;
  `load_options.py`: the model-loading options (KV cache type, flash attention, mmap, RoPE,
  metadata overrides, tensor placements) as llama.cpp takes them, checked against the model.
- `slots.py`: the KV cache's sequences, prefix reuse and ContextShift.
- `sampler.py`: each request's llama.cpp sampler chain (grammar, penalties, draw);
  `drawing.py`: a sequence's next token drawn from one row of logits (sampled, or forced by
  `thinking.py`'s budget), draft rows included.
- `speculation.py`: speculative decoding's n-gram drafters and their pacing (plain Python;
  the engine checks the drafts).
- `engine.py`: `LlamaCppEngine`, batching every active request into one decode per step;
  `card.py`: a model's tokenizer and checks for planning requests.
- `slot_states.py`: a slot's state saved to a file or memory and restored on request.
- `embedder.py`: embeddings, in a context of their own (several inputs per decode).
- `batch.py`, `sequence.py`: one decode's llama_batch, and a request being generated.
- `native.py`: the ctypes extras (persistent thread pool, with a start-up check of the
  struct layout it assumes) and llama.cpp's log and progress callbacks.
- `ggml_devices.py`: ggml's device registry through ctypes; `devices.py`: choosing devices
  and planning where layers go; `rpc.py`: ggml's RPC backend (worker and client side).

May import: llama_cpp and numpy, the rest of `server.core`, `server.devices`, `server.models`,
`server.base`. Nothing outside it imports llama_cpp.
"""

from server.core.llama.engine import LlamaCppEngine
from server.models.files import model_display_name

__all__ = ["LlamaCppEngine", "model_display_name"]
