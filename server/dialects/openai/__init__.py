"""The OpenAI dialect: completions, chat completions, Responses, embeddings and the model
list, also under llama-server's unprefixed paths.

May import the shared modules of `server.dialects` and the layers below it; never another
dialect package.
"""
