"""The launcher's live view of requests: `GET /api/admin/requests`, `POST /api/admin/abort`.

Every open request with its id, genkey, client address, dialect, state (waiting, reading its
prompt, generating), prompt progress and tokens so far, and the live generation speed; and an
abort of one request by id. Only the launcher (or whoever holds `--adminpassword`) may see or
do this: it names other users' genkeys and addresses, which `/api/extra/perf` never shows.

The launcher proves itself with a random token it generates at each start and hands its server
in the `HEARTH_ADMIN_TOKEN` environment variable (never on the command line, which every user
of the machine can read in `ps`). With neither that token nor `--adminpassword` configured,
nobody is let in: the endpoints do not fall back to `--password`, which API users share.
"""

from __future__ import annotations

import hmac
import os

from fastapi import APIRouter, Depends, FastAPI, Request
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from server.dialects.edge.bodies import parse_json_body
from server.dialects.edge.client_address import ClientAddressMiddleware
from server.dialects.edge.deps import SchedulerDep
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, unauthorized_error
from server.dialects.pipeline.openapi import json_body
from server.settings.config import HearthSettings

ADMIN_TOKEN_ENV = "HEARTH_ADMIN_TOKEN"


class LiveRequestRow(TypedDict):
    id: str
    genkey: str
    client: str  # host:port of the client
    dialect: str  # kobold, openai, anthropic or ollama (llama-server's routes are openai)
    key: str  # the name of the API key it used, never the key ("" on a server without)
    state: str  # waiting, prompt or generating
    prompt_done: int  # prompt tokens read so far (a prefix reused from the cache counts)
    prompt_total: int
    tokens: int  # generated so far
    tokens_per_second: float  # this request's live speed (0 until two tokens)


class LiveRequestsAnswer(TypedDict):
    requests: list[LiveRequestRow]  # running first, then the line in order
    tokens_per_second: float  # every generating request together
    generating: int


class AdminAbortRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str


class AdminAbortAnswer(TypedDict):
    success: bool
    id: str


def require_admin(request: Request) -> None:
    """401 in KoboldCpp's shape unless `Authorization: Bearer` carries the launcher's token or
    `--adminpassword` (compared in constant time)."""
    settings: HearthSettings = request.app.state.settings
    secrets = [s.encode() for s in (request.app.state.admin_token, settings.adminpassword) if s]
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    offered = given.strip().encode()
    # Every secret is compared (no early exit), so the timing does not tell which one exists.
    matches = [hmac.compare_digest(offered, secret) for secret in secrets]
    if scheme.lower() != "bearer" or not offered or not any(matches):
        raise unauthorized_error(Dialect.KOBOLD)


router = APIRouter(tags=["Hearth admin"], dependencies=[Depends(require_admin)])


@router.get("/api/admin/requests")
async def live_requests(scheduler: SchedulerDep) -> LiveRequestsAnswer:
    live = scheduler.live_requests()
    rows: list[LiveRequestRow] = [
        {
            "id": row.request_id,
            "genkey": row.genkey,
            "client": row.client,
            "dialect": row.dialect,
            "key": row.key_name,
            "state": row.state.value,
            "prompt_done": row.prompt_done,
            "prompt_total": row.prompt_total,
            "tokens": row.generated,
            "tokens_per_second": round(row.tokens_per_second, 2),
        }
        for row in live.requests
    ]
    generating = sum(1 for row in rows if row["state"] == "generating")
    return {
        "requests": rows,
        "tokens_per_second": round(live.tokens_per_second, 2),
        "generating": generating,
    }


@router.post("/api/admin/abort", openapi_extra=json_body(AdminAbortRequest))
async def abort(request: Request, scheduler: SchedulerDep) -> AdminAbortAnswer:
    body = await parse_json_body(request, AdminAbortRequest, Dialect.KOBOLD)
    if not scheduler.abort_request(body.id):
        raise APIError(404, f"No open request has the id {body.id!r}.", ErrorKind.NOT_FOUND)
    return {"success": True, "id": body.id}


def install(app: FastAPI) -> None:
    """Add the live admin routes and the client-address middleware to `app`, with the
    launcher's token from the environment (none: `--adminpassword` alone, or nobody)."""
    app.state.admin_token = os.environ.get(ADMIN_TOKEN_ENV, "")
    app.add_middleware(ClientAddressMiddleware)
    app.include_router(router)
