"""The core: one request type, the scheduler and the engine behind it. No HTTP, no pydantic.

- `types`: the GenerationRequest every dialect becomes and the events it produces;
  `load_settings`: what loading a model reads (built from the settings at the edge).
- `templates/`: chat conversations and their templates; `text/`: generated text on its way to
  a client (stop strings, the thought, loops); `tool_calls/`: tool calls read as written.
- `scheduling/`: the Scheduler, its queue, worker thread, models and readings, and the Engine
  protocol; `caching/`: the prompt cache in memory and on disk.
- `llama/`: llama.cpp behind the Engine protocol, the only package that imports llama_cpp.

May import: `server.base`, `server.models`, `server.devices`, the standard library, and (in
`llama/` only) llama_cpp and numpy. Never pydantic, FastAPI, the settings model or the
dialects: `make lint` (import-linter) checks it.
"""
