"""GET / : the chat page bundled in `resources/chat/` (no CDN: the machine may be offline)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from server.bundle import root_dir

router = APIRouter(tags=["Pages"])


def resources_dir() -> Path:
    """`resources/` beside the server package, or inside a packaged (frozen) build."""
    return root_dir() / "resources"


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def chat_page() -> HTMLResponse:
    page = resources_dir() / "chat" / "index.html"
    # Read per request: it is small, and a development checkout picks up edits at once.
    return HTMLResponse(page.read_text(encoding="utf-8"), headers={"Cache-Control": "no-cache"})
