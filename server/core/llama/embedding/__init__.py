"""Embeddings and reranking in a context of their own: `embedder` (several inputs per decode),
`pooling` (--pooling as llama.cpp pools) and `rerank` (the rank head's prompts).

May import: llama_cpp, numpy, `loading`, the rest of the core but the engine.
"""
