"""The KoboldAI API as KoboldCpp serves it, its embeddings, its admin API and KoboldAI Lite's
server features (lite.py).

May import the shared modules of `server.dialects` and the layers below it; never another
dialect package.
"""
