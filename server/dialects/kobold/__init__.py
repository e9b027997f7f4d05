"""The KoboldAI API as KoboldCpp serves it, its embeddings and its admin API.

May import the shared modules of `server.dialects` and the layers below it; never another
dialect package.
"""
