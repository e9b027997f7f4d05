"""Typed dependencies: how a route reaches the scheduler, the settings and the password check.

Everything lives on `app.state`, filled by `create_app`; there are no module globals.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from server.api.errors import unauthorized_error
from server.config import HearthSettings
from server.core.engine import Tokenizer
from server.core.scheduler import Scheduler


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the API may say about the loaded model (it never holds the engine itself)."""

    name: str
    context_size: int
    tokenizer: Tokenizer


def get_scheduler(request: Request) -> Scheduler:
    scheduler: Scheduler = request.app.state.scheduler
    return scheduler


def get_settings(request: Request) -> HearthSettings:
    settings: HearthSettings = request.app.state.settings
    return settings


def get_model_info(request: Request) -> ModelInfo:
    info: ModelInfo = request.app.state.model_info
    return info


def has_valid_key(request: Request) -> bool:
    """True when no password is set, or the request carries it as a Bearer token."""
    password: str | None = request.app.state.settings.password
    if not password:
        return True
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    # Constant-time comparison: the password guards a network service.
    return hmac.compare_digest(token.strip().encode(), password.encode())


def require_key(request: Request) -> None:
    if not has_valid_key(request):
        raise unauthorized_error()


SchedulerDep = Annotated[Scheduler, Depends(get_scheduler)]
SettingsDep = Annotated[HearthSettings, Depends(get_settings)]
ModelInfoDep = Annotated[ModelInfo, Depends(get_model_info)]
RequireKey = Depends(require_key)
