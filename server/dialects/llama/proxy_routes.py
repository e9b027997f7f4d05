"""llama-server's `/cors-proxy` (its web UI's way to reach MCP servers across origins), off.

llama-server registers the route either way and, unless started with `--ui-mcp-proxy`, answers
it with a 403 `feature_disabled`, so its web UI can tell "off here" from "no such server".
Hearth has no such proxy (fetching any URL a client names is a door into the network it runs
in), so it always answers as llama-server does with the proxy off.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from server.dialects.edge.deps import key_required
from server.dialects.edge.errors import APIError, Dialect, ErrorKind

PROXY_OFF_MESSAGE = "this feature is disabled"

router = APIRouter(tags=["llama-server"])


@router.api_route(
    "/cors-proxy",
    methods=["GET", "POST"],
    dependencies=[key_required(Dialect.OPENAI)],
    include_in_schema=False,
)
async def cors_proxy() -> JSONResponse:
    """Always llama-server's answer with its proxy off."""
    raise feature_disabled()


def feature_disabled() -> APIError:
    """llama-server's 403 for a feature it was not started with (its body has no `code`)."""
    body = {"error": {"message": PROXY_OFF_MESSAGE, "type": "feature_disabled"}}
    return APIError(403, PROXY_OFF_MESSAGE, ErrorKind.SERVER, body=body)
