"""The prompt cache: saved KV states in memory by longest token prefix, LRU under a bound
(`prompt_cache`), the same on disk for `--cachedir`, checksummed files written atomically
(`prompt_disk`), and both together with the disk written by a thread of its own
(`state_store`). The engine's slots (`llama/sequences/slots.py`) save into it and restore
from it.

May import: the standard library and `server.base`.
"""
