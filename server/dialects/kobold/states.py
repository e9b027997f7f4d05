"""KoboldCpp's save states: `/api/admin/check_state`, `save_state`, `load_state` and
`clear_state`. A save state is the KV cache of the slot used last (KoboldCpp's one context)
copied into memory under a number (0 to 4, or up to --smartcache N - 1, as KoboldCpp's
`savestate_limit`), and put back on request: a story can be rewound without reading it again.

They go through the queue like any request (server/dialects/routes/slot_actions.py). Differences on
purpose: KoboldCpp answers a failure with 200 and `{"success": false}`; Hearth sends the same
body with a 4xx/5xx status and the reason in KoboldCpp's error shape. The routes ask for
--adminpassword (else --password) as KoboldCpp's admin routes do, but not for --admin mode:
they switch no model.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from server.core.types import SlotAction, SlotActionEvent, SlotActionKind
from server.dialects.edge.bodies import parse_json_body
from server.dialects.edge.deps import ModelInfoDep, SchedulerDep, SettingsDep, has_admin_key
from server.dialects.edge.errors import APIError, Dialect, unauthorized_error
from server.dialects.pipeline.openapi import json_body
from server.dialects.routes.slot_actions import run_slot_action
from server.settings.config import HearthSettings

router = APIRouter(tags=["KoboldAI admin"])
KOBOLD = Dialect.KOBOLD


class KoboldStateRequest(BaseModel):
    """The body of save_state and load_state: which save state."""

    model_config = ConfigDict(extra="allow")

    slot: int = Field(default=0, ge=0, le=4096)


class KoboldStatesRequest(BaseModel):
    """The body of check_state and clear_state: nothing (an empty object, or none)."""

    model_config = ConfigDict(extra="allow")


@router.post("/api/admin/check_state", openapi_extra=json_body(KoboldStatesRequest))
async def check_state(
    request: Request, settings: SettingsDep, scheduler: SchedulerDep, model: ModelInfoDep
) -> JSONResponse:
    """What each save state holds, and what saving the current context would take."""
    await parse_json_body(request, KoboldStatesRequest, KOBOLD, optional=True)
    done = await _act(request, settings, scheduler, model, SlotActionKind.CHECK, 0)
    old_states = [{"tokens": tokens, "size": size} for tokens, size in done.states]
    return _success(done, old_states=old_states)


@router.post("/api/admin/save_state", openapi_extra=json_body(KoboldStateRequest))
async def save_state(
    request: Request, settings: SettingsDep, scheduler: SchedulerDep, model: ModelInfoDep
) -> JSONResponse:
    return await _numbered(request, settings, scheduler, model, SlotActionKind.SAVE)


@router.post("/api/admin/load_state", openapi_extra=json_body(KoboldStateRequest))
async def load_state(
    request: Request, settings: SettingsDep, scheduler: SchedulerDep, model: ModelInfoDep
) -> JSONResponse:
    return await _numbered(request, settings, scheduler, model, SlotActionKind.RESTORE)


@router.post("/api/admin/clear_state", openapi_extra=json_body(KoboldStatesRequest))
async def clear_state(
    request: Request, settings: SettingsDep, scheduler: SchedulerDep, model: ModelInfoDep
) -> JSONResponse:
    """Every save state dropped (their memory freed)."""
    await parse_json_body(request, KoboldStatesRequest, KOBOLD, optional=True)
    await _act(request, settings, scheduler, model, SlotActionKind.ERASE, -1)
    return JSONResponse({"success": True})


async def _numbered(
    request: Request,
    settings: HearthSettings,
    scheduler: SchedulerDep,
    model: ModelInfoDep,
    kind: SlotActionKind,
) -> JSONResponse:
    """save_state or load_state: the body names the save state."""
    body = await parse_json_body(request, KoboldStateRequest, KOBOLD, optional=True)
    return _success(await _act(request, settings, scheduler, model, kind, body.slot))


async def _act(
    request: Request,
    settings: HearthSettings,
    scheduler: SchedulerDep,
    model: ModelInfoDep,
    kind: SlotActionKind,
    number: int,
) -> SlotActionEvent:
    if not has_admin_key(request):  # --adminpassword, else any API key
        raise unauthorized_error(KOBOLD)
    action = SlotAction(kind, 0, memory_slot=number)
    try:
        return await run_slot_action(scheduler, model, action, KOBOLD)
    except APIError as exc:
        if exc.status == 503:
            raise
        raise APIError(exc.status, exc.message, body={"success": False, **exc.body}) from None


def _success(done: SlotActionEvent, **more: Any) -> JSONResponse:
    return JSONResponse(
        {"success": True, **more, "new_state_size": done.size, "new_tokens": done.tokens}
    )
