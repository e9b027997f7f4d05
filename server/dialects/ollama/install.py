"""Every Ollama route, registered in one place: /api (generate, chat, models, pull, show) and
the embeddings."""

from __future__ import annotations

from fastapi import FastAPI

from server.dialects.ollama import embeddings, routes


def install(app: FastAPI) -> None:
    for router in (routes.router, embeddings.router):
        app.include_router(router)
