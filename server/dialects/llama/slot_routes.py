"""llama-server's `/slots`: each slot and what its KV cache holds (GET), and a slot's state
saved to a file, restored from one or erased (`POST /slots/{id}?action=save|restore|erase`,
files under --slot-save-path; without it the actions are refused, as there).

The answers carry llama-server's field names (`n_saved`, `n_written`, `timings.save_ms`, …).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from typing_extensions import TypedDict

from server.core.types import SlotAction, SlotActionKind
from server.dialects.edge.deps import ModelInfoDep, SchedulerDep, SettingsDep, key_required
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, error_body
from server.dialects.llama.schemas import LlamaBase
from server.dialects.pipeline.routing import Served, json_route
from server.dialects.routes.slot_actions import run_slot_action, slot_file

router = APIRouter(tags=["llama-server"])
OPENAI = Dialect.OPENAI
NO_SLOT_PATH = "This server does not support slots action. Start it with `--slot-save-path`"
NO_SLOTS = "This server does not support slots endpoint. Start it with `--slots`"


class Slot(TypedDict):
    """One entry of GET /slots."""

    id: int
    n_ctx: int
    is_processing: bool
    n_prompt_tokens: int  # tokens the slot's KV cache holds (its last prompt and reply)


class SlotFileRequest(LlamaBase):
    """The body of a save or restore action (erase needs none)."""

    filename: str = ""


class SlotSaved(TypedDict):
    id_slot: int
    filename: str
    n_saved: int
    n_written: int
    timings: dict[str, float]


class SlotRestored(TypedDict):
    id_slot: int
    filename: str
    n_restored: int
    n_read: int
    timings: dict[str, float]


class SlotErased(TypedDict):
    id_slot: int
    n_erased: int


@router.get("/slots", dependencies=[key_required(OPENAI)])
async def slots(scheduler: SchedulerDep, model: ModelInfoDep, settings: SettingsDep) -> list[Slot]:
    """The parallel slots, which are generating now and how many tokens each caches; 501, as
    llama-server's, with --no-slots."""
    if settings.no_slots:
        raise APIError(501, NO_SLOTS, body=_not_supported(NO_SLOTS))
    slot_count = scheduler.parallel_slots
    running = scheduler.snapshot().running
    held = scheduler.slot_tokens()
    return [
        {
            "id": i,
            "n_ctx": model.context_size // slot_count,
            "is_processing": i < running,
            "n_prompt_tokens": held[i] if i < len(held) else 0,
        }
        for i in range(slot_count)
    ]


@json_route(router, "/slots/{id_slot}", SlotFileRequest, OPENAI, optional=True)
async def slot_action(
    body: SlotFileRequest, served: Served
) -> SlotSaved | SlotRestored | SlotErased:
    folder = served.settings.slot_save_path
    if not folder:
        raise APIError(501, NO_SLOT_PATH, body=_not_supported(NO_SLOT_PATH))
    slot = _slot_id(served.request)
    kind = _kind(served.request)
    path = None
    if kind is not SlotActionKind.ERASE:
        saving = kind is SlotActionKind.SAVE
        path = str(slot_file(folder, body.filename, saving=saving, dialect=OPENAI))
    action = SlotAction(kind, slot, path=path)
    done = await run_slot_action(served.scheduler, served.model, action, OPENAI)
    milliseconds = done.seconds * 1000
    if kind is SlotActionKind.SAVE:
        saved: SlotSaved = {
            "id_slot": slot,
            "filename": body.filename,
            "n_saved": done.tokens,
            "n_written": done.size,
            "timings": {"save_ms": milliseconds},
        }
        return saved
    if kind is SlotActionKind.RESTORE:
        restored: SlotRestored = {
            "id_slot": slot,
            "filename": body.filename,
            "n_restored": done.tokens,
            "n_read": done.size,
            "timings": {"restore_ms": milliseconds},
        }
        return restored
    return {"id_slot": slot, "n_erased": done.tokens}


def _slot_id(request: Request) -> int:
    try:
        return int(request.path_params["id_slot"])
    except ValueError:
        raise APIError(400, "Invalid slot ID", dialect=OPENAI) from None


def _kind(request: Request) -> SlotActionKind:
    action = request.query_params.get("action", "")
    if action not in ("save", "restore", "erase"):
        raise APIError(400, "Invalid action: use save, restore or erase", dialect=OPENAI)
    return SlotActionKind(action)


def _not_supported(message: str) -> dict[str, object]:
    body = dict(error_body(OPENAI, message, ErrorKind.SERVER))
    body["error"] = {**body["error"], "type": "not_supported_error", "code": 501}  # type: ignore[dict-item]
    return body
