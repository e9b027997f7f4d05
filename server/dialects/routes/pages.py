"""GET / : the chat page bundled in `resources/chat/` (no CDN: the machine may be offline), and
GET /chat-files/{path}: the page's own script and its vendored libraries, from that folder only."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, Response

from server.base.bundle import root_dir

router = APIRouter(tags=["Pages"])

# Only these kinds are served, each with its type stated: a browser must never guess (nosniff).
# Licence files have no suffix and are served as text.
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    "": "text/plain; charset=utf-8",
}
# Vendored libraries change only with a Hearth release: cached for a day. The page's own files
# are revalidated on each load (ETag), so a development checkout picks up edits at once.
VENDOR_CACHE = "public, max-age=86400"
OWN_CACHE = "no-cache"
# The page runs only Hearth's own scripts and talks only to Hearth: model output that somehow
# became markup still could not run script, load remote images or frames, or send data away.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'self'"
)


def resources_dir() -> Path:
    """`resources/` beside the server package, or inside a packaged (frozen) build."""
    return root_dir() / "resources"


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def chat_page() -> HTMLResponse:
    page = resources_dir() / "chat" / "index.html"
    # Read per request: it is small, and a development checkout picks up edits at once.
    return HTMLResponse(
        page.read_text(encoding="utf-8"),
        headers={"Cache-Control": "no-cache", "Content-Security-Policy": PAGE_POLICY},
    )


def chat_file(path: str) -> Path | None:
    """The file `path` names under `resources/chat/`, or None: nothing outside that folder
    (`..`, absolute paths, links leading out), no folders, no hidden files, no other kinds."""
    folder = (resources_dir() / "chat").resolve()
    if not path or "\\" in path or "\x00" in path:
        return None
    parts = path.split("/")
    if any(part in ("", ".", "..") or part.startswith(".") for part in parts):
        return None
    candidate = (folder / path).resolve()
    if not candidate.is_relative_to(folder) or not candidate.is_file():
        return None
    if candidate.suffix.lower() not in CONTENT_TYPES:
        return None
    return candidate


@router.api_route("/chat-files/{path:path}", methods=["GET", "HEAD"], include_in_schema=False)
async def chat_files(path: str) -> Response:
    found = chat_file(path)
    if found is None:
        return PlainTextResponse("Not found", status_code=404)
    vendored = path.startswith("vendor/")
    return FileResponse(
        found,
        media_type=CONTENT_TYPES[found.suffix.lower()],
        headers={
            "Cache-Control": VENDOR_CACHE if vendored else OWN_CACHE,
            "X-Content-Type-Options": "nosniff",
        },
    )
