"""KoboldCpp's admin API: `/api/admin/list_options` and `/api/admin/reload_config`.

KoboldCpp restarts itself with the chosen `.kcpps` or GGUF from `--admindir`; Hearth switches
the model in place, through the scheduler's queue like any request (so waiters keep their
order), and answers once the model is loaded, or with the reason it could not be. Differences
on purpose: with admin mode off or a wrong `--adminpassword` KoboldCpp answers 200 with `[]`
or `{"success": false}`; Hearth answers 403 / 401 in KoboldCpp's error shape, and without an
admin password it asks for one of the API keys (KoboldCpp asks for nothing). Only a `.kcpps`
file's model is applied, and `--api-key-file` is re-read: the server's other settings need a
restart (the answer says so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from server.core.types import FinishReason, GenerationRequest
from server.dialects.edge.bodies import parse_json_body
from server.dialects.edge.deps import (
    KeyRingDep,
    ModelInfoDep,
    SchedulerDep,
    SettingsDep,
    has_admin_key,
)
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, busy_error, unauthorized_error
from server.dialects.kobold.schemas import KoboldReloadRequest
from server.dialects.pipeline.admission import submit
from server.dialects.pipeline.model_choice import ModelChoice
from server.dialects.pipeline.openapi import json_body
from server.settings.config import HearthSettings
from server.settings.kcpps import SettingsFileError, load_kcpps

router = APIRouter(tags=["KoboldAI admin"])
INITIAL_MODEL = "initial_model"  # KoboldCpp's words for the startup model and for none
UNLOAD_MODEL = "unload_model"
_SETTINGS_FILES = (".kcpps", ".kcppt")


def admin_level(settings: HearthSettings) -> int:
    """/api/extra/version's `admin`: 0 off, 1 on, 2 on with a password (KoboldCpp's values)."""
    if not settings.admin:
        return 0
    return 2 if settings.adminpassword else 1


def _allowed(request: Request, settings: HearthSettings) -> ModelChoice:
    if not settings.admin:
        raise APIError(
            403, "Admin mode is off: start Hearth with --admin to switch models.", ErrorKind.SERVER
        )
    # Without an admin password the server's API keys guard it (KoboldCpp: nothing).
    if not has_admin_key(request):
        raise unauthorized_error(Dialect.KOBOLD)
    choice: ModelChoice = request.app.state.model_choice
    if not choice.switches_models:  # a scripted engine: nothing to switch
        raise APIError(403, "This server cannot switch models.", ErrorKind.SERVER)
    return choice


def _options(settings: HearthSettings, choice: ModelChoice) -> dict[str, str | Path]:
    """Each option's name → the catalog name it loads, or the settings file it reads."""
    folder = Path(settings.admin_folder).expanduser().resolve() if settings.admin_folder else None
    options: dict[str, str | Path] = {}
    for entry in choice.catalog.entries:
        # A file of the admin folder by its relative path (what KoboldCpp lists), others by name.
        path = entry.path.resolve()
        if folder is not None and path.is_relative_to(folder):
            options[path.relative_to(folder).as_posix()] = entry.name
        else:
            options[entry.name] = entry.name
    if folder is not None:
        for path in _settings_files(folder):
            options[path.relative_to(folder).as_posix()] = path
    return options


def _settings_files(folder: Path) -> list[Path]:
    """The `.kcpps`/`.kcppt` files of the folder and its subfolders (one level, as KoboldCpp)."""
    found = [p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in _SETTINGS_FILES]
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        found += [p for p in sub.iterdir() if p.is_file() and p.suffix.lower() in _SETTINGS_FILES]
    return sorted(found)


@router.get("/api/admin/list_options")
async def list_options(request: Request, settings: SettingsDep) -> list[str]:
    choice = _allowed(request, settings)
    return [*_options(settings, choice), INITIAL_MODEL, UNLOAD_MODEL]


@router.post("/api/admin/reload_config", openapi_extra=json_body(KoboldReloadRequest))
async def reload_config(
    request: Request,
    settings: SettingsDep,
    scheduler: SchedulerDep,
    model: ModelInfoDep,
    key_ring: KeyRingDep,
) -> JSONResponse:
    choice = _allowed(request, settings)
    # KoboldCpp's reload restarts the server, which reads its keys again: so does this one.
    key_ring.reload()
    body = await parse_json_body(request, KoboldReloadRequest, Dialect.KOBOLD)
    wanted = body.filename.strip()
    note = ""
    if wanted == UNLOAD_MODEL:
        name: str | None = None
    elif wanted == INITIAL_MODEL:
        name = choice.catalog.entries[0].name
    else:
        option = _options(settings, choice).get(wanted)
        if option is None:
            raise APIError(
                404,
                f"'{wanted}' is not one of /api/admin/list_options",
                ErrorKind.NOT_FOUND,
                body=_failure(f"'{wanted}' is not one of /api/admin/list_options", "not_found"),
            )
        if isinstance(option, Path):
            name, note = _model_of_settings_file(option, choice)
        else:
            name = option
    unload = name is None
    job = submit(
        scheduler,
        model,
        GenerationRequest(
            request_id=f"admin-{next(request.app.state.request_numbers)}",
            prompt="",
            max_tokens=1,
            model=name,
            model_only=True,
            keep_alive=0.0 if unload else None,
        ),
        Dialect.KOBOLD,
    )
    _text, outcome = await scheduler.collect(job)
    if outcome.server_stopping:
        raise busy_error()
    if outcome.finish_reason is not FinishReason.STOP:
        message = outcome.error or "the model was not loaded"
        raise APIError(500, message, ErrorKind.SERVER, body=_failure(message, "server_error"))
    answer: dict[str, Any] = {"success": True, "model": name}
    if note:
        answer["note"] = note
    return JSONResponse(answer)


def _model_of_settings_file(path: Path, choice: ModelChoice) -> tuple[str, str]:
    """The catalog name of a `.kcpps` file's model (listed now if it was not), and a note."""
    try:
        settings = load_kcpps(path)
    except SettingsFileError as exc:
        raise APIError(400, f"{path.name}: {exc}", body=_failure(f"{path.name}: {exc}")) from None
    if not settings.model_param:
        first = choice.catalog.entries[0]
        model_path = first.path
    else:
        model_path = Path(settings.model_param).expanduser()
        if not model_path.is_absolute():
            model_path = path.parent / model_path
    added = choice.add_file(model_path)  # a file already listed keeps its name
    if added is None:
        message = f"{path.name}: its model {model_path} is not a usable GGUF file"
        raise APIError(400, message, body=_failure(message))
    return added, _APPLIED_MODEL_ONLY


_APPLIED_MODEL_ONLY = (
    "Hearth switched the model in place; the file's other settings apply after a restart."
)


def _failure(message: str, kind: str = "bad_input") -> dict[str, Any]:
    """KoboldCpp's `{"success": false}`, with the reason in its error shape."""
    return {"success": False, "detail": {"msg": message, "type": kind}}
