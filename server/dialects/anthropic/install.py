"""Every Anthropic route (/v1/messages and its token count), registered in one place."""

from __future__ import annotations

from fastapi import FastAPI

from server.dialects.anthropic import routes


def install(app: FastAPI) -> None:
    for router in (routes.router,):
        app.include_router(router)
