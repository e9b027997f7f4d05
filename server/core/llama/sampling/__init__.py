"""Choosing tokens: `sampler` (each request's llama.cpp sampler chain: grammar, penalties,
bias, draw), `json_grammar` (a JSON schema's grammar, with llama.cpp's rule for a string's
characters) and `drawing` (a sequence's next token drawn from one row of logits, or forced by
its thinking budget).

May import: llama_cpp, numpy, `loading`, `sequences`, the rest of the core but the engine.
"""
