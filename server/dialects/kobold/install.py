"""Every KoboldAI route, registered in one place: KoboldCpp's API, its admin and save-state
routes, KoboldAI Lite's features, the resume of a dropped stream and the embeddings."""

from __future__ import annotations

from fastapi import FastAPI

from server.dialects.kobold import admin, embeddings, lite, resume_route, routes, states


def install(app: FastAPI) -> None:
    for router in (
        routes.router,
        admin.router,
        states.router,
        lite.router,
        resume_route.router,
        embeddings.router,
    ):
        app.include_router(router)
