"""Defaults that both the settings and the core need (neither may import the other)."""

import os

# KoboldCpp's default `--multiuser` (requests in flight), also what the legacy value 1 means.
DEFAULT_MULTIUSER = 10

# llama.cpp's n_batch (tokens per decode call) when --batchsize is not set.
DEFAULT_BATCH = 512


def default_thread_count() -> int:
    """Threads when --threads is not set: every core, at most 8 (more rarely helps decode)."""
    return max(1, min(os.cpu_count() or 1, 8))
