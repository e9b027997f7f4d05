"""The server's own routes, registered in one place, last: /metrics, the chat page, and the
launcher's live view (whose client-address middleware goes outermost)."""

from __future__ import annotations

from fastapi import FastAPI

from server.dialects.routes import admin_live, metrics, pages


def install(app: FastAPI) -> None:
    app.include_router(metrics.router)
    app.include_router(pages.router)
    admin_live.install(app)
