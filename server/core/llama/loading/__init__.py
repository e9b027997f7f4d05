"""A GGUF into llama.cpp: `model` (the model and its context, the tokenizer, fitting a prompt),
`load_options` (flash attention, KV types, mmap, RoPE, overrides and tensor placements as
llama.cpp takes them), `native` (ctypes extras and llama.cpp's callbacks), `ggml_devices`,
`devices` and `rpc` (ggml's devices, where layers go, the RPC backend), `lora` (adapters),
`infill` (FIM tokens) and `media` (the multimodal projector, libmtmd).

May import: llama_cpp, numpy, `server.devices`, `server.models`, `server.base`.
"""
