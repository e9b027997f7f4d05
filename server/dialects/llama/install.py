"""Every llama-server route, registered in one place: its native routes (with their parts:
infill, rerank, router, tools, resume, CORS proxy), /slots, and Vertex AI's /predict when the
environment asks for it (gcp_routes.py)."""

from __future__ import annotations

import os

from fastapi import FastAPI

from server.dialects.llama import gcp_routes, routes, slot_routes


def install(app: FastAPI) -> None:
    app.include_router(routes.router)
    app.include_router(slot_routes.router)
    gcp_routes.install(app, os.environ)  # after /health exists: AIP_HEALTH_ROUTE copies it
