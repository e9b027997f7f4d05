"""The HTTP dialects: each turns its wire format into the core's GenerationRequest, and the
events that come back into its answers and streams.

- One package per dialect: `kobold`, `openai`, `anthropic`, `ollama`, `llama` (llama-server's
  native routes). Each has `schemas` (pydantic requests, TypedDict answers; OpenAI's requests
  are `requests`), `adapter` (body → plan), `formatter` (answers and stream events: a
  `WireFormat`) and `routes` (the endpoints).
- The skeletons they fill in, at this level: `routing` (`generation_route`, `json_route`),
  `wire` (the wire-format base classes, the in-band failure ending, `sse_json`), `serving`
  (one generation queued and answered), `choices` (OpenAI's `n`), `admission` (the model a
  request runs on, its queue place), `embeddings` (every embedding route), `resumable`
  (streams that outlive their connection), `streaming` (SSE/NDJSON framing, disconnects).
- Shared pieces: `common` (planning a chat, reading events back), `errors` (each dialect's error
  shape, body parsing), `deps`, `model_choice`, `model_files`, `sampling`, `token_bias`,
  `function_tools`, `limits`, `openapi`; what two dialects both speak: `llama_extensions`
  (llama-server's figures and native answer, also in its OpenAI answers) and
  `embedding_shapes` (OpenAI's embeddings, which KoboldCpp mirrors). Beside them: `metrics`
  (/metrics), `admin_live` (the launcher's live view), `pages` (the chat page). Guarding a
  shared server: `api_keys` (the key ring: --password, --api-key, --api-key-file, names),
  `client_address` (who asked, through --trustedproxies), `rate_limit`, `cors`.

May import: `server.core`, `server.models`, `server.devices`, `server.settings`, `server.base`,
FastAPI, pydantic and sse-starlette. Never `server.process` or llama_cpp; a dialect package
never imports another (a piece two dialects need lives at this level): `make lint` checks it.
"""
