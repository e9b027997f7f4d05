"""Defaults that both the settings and the core need (neither may import the other)."""

import os

# KoboldCpp's default `--multiuser` (requests in flight), also what the legacy value 1 means.
DEFAULT_MULTIUSER = 10

# Tokens of context when --contextsize is not set: room for a long system prompt and a tool
# list (Open WebUI's 36 tools take 6,600 tokens) with a conversation after it.
DEFAULT_CONTEXT_SIZE = 12288

# llama.cpp's n_batch (tokens per decode call) when --batchsize is not set.
DEFAULT_BATCH = 512


def default_thread_count() -> int:
    """Threads when --threads is not set: every core, at most 8 (more rarely helps decode)."""
    return max(1, min(os.cpu_count() or 1, 8))


# The prompt cache's memory bound when --cacheram is not set: a quarter of llama-server's
# 8 GiB, as a desktop shares its memory with everything else (a 7B model's 4,000-token
# conversation is ~0.5 GiB of KV state; the bundled 270M model's is ~70 MiB).
DEFAULT_CACHE_RAM_MIB = 2048

# The bound on --cachedir's files of one model when --cachedisk is not set.
DEFAULT_CACHE_DISK_MIB = 8192
