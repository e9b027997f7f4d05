"""The HTTP dialects: each turns its wire format into the core's GenerationRequest, and the
events that come back into its answers and streams.

- One package per dialect: `kobold`, `openai`, `anthropic`, `ollama`, `llama` (llama-server's
  native routes). Each has `schemas` (pydantic requests, TypedDict answers; OpenAI's requests
  are `requests`), `adapter` (body → plan), `formatter` (answers and stream events: a
  `WireFormat`) and `routes` (the endpoints). They never import each other.
- What they share, one package per role: `edge/` (errors, body parsing, keys, addresses, CORS,
  rate limits), `media/` (images and sounds), `chat/` (planning a chat, reading its answer),
  `streams/` (wire formats, SSE and NDJSON, resumable streams), `pipeline/` (route skeletons,
  model choice, admission, serving), `embedding/` (the embedding skeleton) and `routes/`
  (server-wide routes and what two dialects share).
"""
