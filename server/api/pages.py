"""GET / : a small page saying what this server offers (the chat page replaces it later)."""

from __future__ import annotations

import html

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from server.api.deps import ModelInfoDep

router = APIRouter(tags=["Pages"])

_ENDPOINTS = [
    ("KoboldAI", "/api/v1/generate, /api/extra/generate/stream"),
    ("OpenAI", "/v1/completions, /v1/chat/completions, /v1/responses, /v1/models"),
    ("Anthropic", "/v1/messages"),
    ("Ollama", "/api/generate, /api/chat, /api/tags"),
]


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def home(model: ModelInfoDep) -> str:
    rows = "".join(
        f"<tr><th>{name}</th><td><code>{html.escape(paths)}</code></td></tr>"
        for name, paths in _ENDPOINTS
    )
    return (
        "<!doctype html><meta charset='utf-8'><title>Hearth</title>"
        "<style>body{font:16px system-ui;margin:2em;max-width:46em}th{text-align:left;"
        "padding-right:1em}</style>"
        f"<h1>Hearth is serving {html.escape(model.name)}</h1>"
        f"<p>Context: {model.context_size} tokens. Point any client at this address:</p>"
        f"<table>{rows}</table>"
    )
