"""Model files: reading a GGUF header (`gguf`), the memory a model needs and the layers that
fit (`memory`), the bundled model and split files (`files`), the models a server can serve
(`catalog`), downloads (`fetch`) and Hugging Face search (`hub`).

May import: `server.base`, `server.settings`. Never the core, the dialects or llama_cpp: the
launcher reads model files through this layer without loading llama.cpp.
"""
