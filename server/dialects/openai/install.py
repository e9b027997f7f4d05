"""Every OpenAI route, registered in one place: /v1 (chat, completions, Responses, models), the
same routes under llama-server's paths, and the embeddings."""

from __future__ import annotations

from fastapi import FastAPI

from server.dialects.openai import embeddings, routes


def install(app: FastAPI) -> None:
    for router in (routes.router, routes.llama_server_router, embeddings.router):
        app.include_router(router)
