"""Defaults that both the settings and the core need (neither may import the other)."""

# KoboldCpp's default `--multiuser` (requests in flight), also what the legacy value 1 means.
DEFAULT_MULTIUSER = 10

# llama.cpp's n_batch (tokens per decode call) when --batchsize is not set.
DEFAULT_BATCH = 512
