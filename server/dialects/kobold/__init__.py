"""The KoboldAI API as KoboldCpp serves it, its embeddings, its admin API, KoboldAI Lite's
server features (lite.py) and Hearth's resume of a dropped stream (resume_route.py).

May import the shared modules of `server.dialects` and the layers below it; never another
dialect package.
"""
