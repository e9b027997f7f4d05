"""The settings: one pydantic model (`config.HearthSettings`) behind the command line (`cli`),
KoboldCpp's `.kcpps` files (`kcpps`) and the launcher's tabs.

May import: `server.base`, pydantic. Never the core, the dialects or llama_cpp (the launcher
imports this layer).
"""
