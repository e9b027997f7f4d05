"""Every embedding route's skeleton (`embeddings`: `embedding_route`) and OpenAI's embedding
shapes, which KoboldCpp mirrors (`embedding_shapes`).

May import: the shared packages here but `routes`, the core.
"""
