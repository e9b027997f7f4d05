"""The core: one request type, the scheduler and the engine behind it. No HTTP, no pydantic.

- `types`, `chat`: the GenerationRequest every dialect becomes, the events it produces, and
  chat conversations rendered into a prompt; `text_stream`, `tool_stream`: token bytes into
  text a client may see, and chat output into text and tool-call events.
- `scheduler`: `Scheduler`, the front the dialects use, over its parts: `request_queue` (the
  line and KoboldCpp's rules), `worker` (the generation thread, one job at a time or batched),
  `model_lifecycle` (switching, keep_alive, unloading) and `observation` (perf, /metrics, the
  live view); `job` is one admitted request as both threads see it; `counters` the totals.
- `engine`: the Engine protocol; `engine_pool`: the models behind the scheduler (always a
  pool, of one when one model is served); `llama/`: llama.cpp behind that protocol, the only
  package that imports llama_cpp. `load_settings`: what loading a model reads.
- `prompt_cache` (saved KV states in memory, by longest token prefix, LRU under a bound),
  `prompt_disk` (the same on disk, `--cachedir`: checksummed files written atomically) and
  `state_store` (both together, the disk written by a thread of its own): the prompt cache
  that `llama/slots.py` saves slots into and restores them from.

May import: `server.base`, `server.models`, `server.devices`, the standard library, and (in
`llama/` only) llama_cpp and numpy. Never pydantic, FastAPI, the settings model or the
dialects: `make lint` (import-linter) checks it.
"""
