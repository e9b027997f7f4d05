"""The Anthropic Messages dialect: /v1/messages and its token count.

May import the shared modules of `server.dialects` and the layers below it; never another
dialect package.
"""
