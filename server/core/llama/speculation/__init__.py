"""Speculative decoding: `speculation` (llama-server's n-gram drafters and a pacer per
sequence, plain Python) and `draft_model` (a second model on the same vocabulary drafting
for the first, one draft sequence per slot).

May import: llama_cpp, `loading`, the rest of the core but the engine.
"""
