"""The Ollama dialect: NDJSON streams, model listing, pulls and embeddings.

May import the shared modules of `server.dialects` and the layers below it; never another
dialect package.
"""
