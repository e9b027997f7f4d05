"""Requests being generated: `sequence` (one request in a slot), `batch` (one decode's
llama_batch), `slots` (KV sequences, prefix reuse, ContextShift, the prompt cache),
`slot_states` (a slot saved to a file or memory and back), `thinking` (the thinking budget)
and `decisions` (the hidden tool decision as a sequence of its own).

May import: llama_cpp, `loading`, `speculation`, the rest of the core but the engine.
"""
