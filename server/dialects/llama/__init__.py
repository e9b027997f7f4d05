"""llama.cpp's `llama-server` native routes (its web UI, editors' "llama.cpp" providers);
its OpenAI routes without `/v1` are the OpenAI package's.

May import the shared modules of `server.dialects` and the layers below it; never another
dialect package.
"""
