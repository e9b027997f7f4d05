"""Model files, read without llama.cpp.

- A GGUF header: `gguf_header` parses and checks it; `gguf` says what it means (architecture,
  size, quantization, chat template) and remembers each file's SHA-256.
- `memory`: the memory a model needs and the layers that fit (GPU Layers "Auto").
- `files`: the model file to load (the user's, or the bundled one, assembled once) and the
  checks and names of model files (split parts, display names, `ModelFileError`).
- `catalog`: the models a server can serve (`--modeldir`, `--admindir`, the Hub cache), each
  paired with the projector beside it; `projector_header` (what a projector takes: vision,
  audio) and `projector_files` (which projector goes with a model).
- From the network: `fetch.model_for` (`--hf`, model URLs) over `hub_names` (references and
  which files a quantization is), `hub_request` (one Hub request, failures as one sentence),
  `hub_files` (the Hub's cache: download, list, delete) and `download` (resumable HTTP);
  `hub` is the launcher's Hub search.

May import: `server.base`, `server.settings`, and gguf, huggingface_hub and httpx. Never the
core, the dialects, the process or llama_cpp: the launcher reads model files through this
layer without loading llama.cpp.
"""
