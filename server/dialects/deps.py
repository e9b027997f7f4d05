"""Typed dependencies: how a route reaches the scheduler, the settings and the password check.

Everything lives on `app.state`, filled by `create_app`; there are no module globals.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request

from server.core.chat import ChatTemplate
from server.core.engine import SchemaChecker, Tokenizer
from server.core.scheduler import Scheduler
from server.devices.placement import CPU_ONLY, Placement
from server.dialects.errors import Dialect, unauthorized_error
from server.settings.config import HearthSettings


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the API may say about the loaded model (it never holds the engine itself)."""

    name: str
    context_size: int
    tokenizer: Tokenizer
    chat_template: ChatTemplate
    schemas: SchemaChecker
    path: Path | None = None  # the GGUF file (None for a scripted stand-in)
    placement: Placement = CPU_ONLY
    modalities: frozenset[str] = frozenset()  # "vision", "audio": what its projector takes


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
    """True when no password is set, or the request carries it.

    Accepted: `Authorization: Bearer PW` (KoboldCpp, OpenAI, Ollama clients) and Anthropic's
    `x-api-key: PW`, which KoboldCpp ignores so Anthropic SDKs cannot authenticate there.
    """
    return carries_key(request, request.app.state.settings.password)


def carries_key(request: Request, password: str | None) -> bool:
    """True when `password` is None, or the request carries it (Bearer or x-api-key)."""
    if not password:
        return True
    expected = password.encode()
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    # Constant-time comparisons: the password guards a network service.
    if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected):
        return True
    api_key = request.headers.get("x-api-key", "").strip().encode()
    return bool(api_key) and hmac.compare_digest(api_key, expected)


def key_required(dialect: Dialect) -> Any:
    """A route dependency refusing requests without the password, in `dialect`'s error shape."""

    def require_key(request: Request) -> None:
        if not has_valid_key(request):
            raise unauthorized_error(dialect)

    return Depends(require_key)


SchedulerDep = Annotated[Scheduler, Depends(get_scheduler)]
SettingsDep = Annotated[HearthSettings, Depends(get_settings)]
ModelInfoDep = Annotated[ModelInfo, Depends(get_model_info)]
