"""Typed dependencies: how a route reaches the scheduler, the settings and the key check.

Everything lives on `app.state`, filled by `create_app`; there are no module globals.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request

from server.core.scheduling.engine import SchemaChecker, Tokenizer
from server.core.scheduling.scheduler import Scheduler
from server.core.templates.chat import ChatTemplate
from server.devices.placement import CPU_ONLY, Placement
from server.dialects.edge.api_keys import KeyRing, record_key_name
from server.dialects.edge.errors import Dialect, unauthorized_error
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


def get_key_ring(request: Request) -> KeyRing:
    ring: KeyRing = request.app.state.key_ring
    return ring


def key_name_of(request: Request) -> str | None:
    """The name of the API key the request carries ("" when the server needs none), or None
    when it carries none of them.

    Accepted: `Authorization: Bearer KEY` (KoboldCpp, OpenAI, Ollama clients) and Anthropic's
    `x-api-key: KEY`, which KoboldCpp ignores so Anthropic SDKs cannot authenticate there."""
    ring = get_key_ring(request)
    if not ring.required:
        return ""
    for offered in presented_keys(request):
        name = ring.match(offered)
        if name is not None:
            return name
    return None


def presented_keys(request: Request) -> list[str]:
    """The keys a request presents: its `Authorization: Bearer` token, then its `x-api-key`."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    offered = [token.strip()] if scheme.lower() == "bearer" else []
    offered.append(request.headers.get("x-api-key", "").strip())
    return [key for key in offered if key]


def has_valid_key(request: Request) -> bool:
    """True when the server needs no key, or the request carries one of them."""
    return key_name_of(request) is not None


def has_admin_key(request: Request) -> bool:
    """True when the request may use KoboldCpp's admin routes: it carries `--adminpassword`,
    or without one, any API key (as KoboldCpp's admin routes fall back to `--password`)."""
    settings: HearthSettings = request.app.state.settings
    if settings.adminpassword:
        return carries_key(request, settings.adminpassword)
    return has_valid_key(request)


def carries_key(request: Request, password: str | None) -> bool:
    """True when `password` is None, or the request carries it (Bearer or x-api-key)."""
    if not password:
        return True
    expected = password.encode()
    # Constant-time comparisons: the password guards a network service.
    return any(hmac.compare_digest(key.encode(), expected) for key in presented_keys(request))


def key_required(dialect: Dialect) -> Any:
    """A route dependency refusing requests without one of the API keys, in `dialect`'s error
    shape, and recording the name of the key a request used (`api_keys.key_name()`).

    Async on purpose: FastAPI runs a plain function in a worker thread, whose context (and so
    the recorded name) the endpoint would never see."""

    async def require_key(request: Request) -> None:
        ring = get_key_ring(request)
        name = key_name_of(request)
        if name is None:
            given = request.headers.get("authorization") or request.headers.get("x-api-key")
            ring.refused["wrong" if given else "missing"] += 1
            raise unauthorized_error(dialect)
        if ring.required:
            ring.accepted[name] += 1
        record_key_name(name)

    return Depends(require_key)


SchedulerDep = Annotated[Scheduler, Depends(get_scheduler)]
SettingsDep = Annotated[HearthSettings, Depends(get_settings)]
ModelInfoDep = Annotated[ModelInfo, Depends(get_model_info)]
KeyRingDep = Annotated[KeyRing, Depends(get_key_ring)]
