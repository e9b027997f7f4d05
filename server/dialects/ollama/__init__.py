"""The Ollama dialect: NDJSON streams, model listing."""
