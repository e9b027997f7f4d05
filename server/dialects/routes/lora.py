"""llama-server's LoRA adapters over HTTP, shared by its native routes and its OpenAI ones: the
adapters and their scales (`GET /lora-adapters`), the scales every request gets changed
(`POST /lora-adapters`), and a request's own scales (the `lora` field of `/completion`,
`/v1/completions` and `/v1/chat/completions`).

The adapters are the settings' (`--lora`, `--lora-scaled`), numbered as llama-server numbers
them; the scales every request gets are the settings' one list of them (LoraFields
.lora_scales_now), which every model loaded with these settings reads as each request starts
(server/core/llama/loading/lora.py). An id the server does not have is refused with a 400.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from server.dialects.chat.plans import ChatPlan
from server.dialects.edge.bodies import MAX_JSON_DEPTH, BodyTooLargeError, json_depth, read_body
from server.dialects.edge.errors import (
    APIError,
    Dialect,
    describe_validation_error,
    too_large_error,
)
from server.models.gguf import gguf_summary
from server.models.gguf_header import GGUFFormatError
from server.settings.config import HearthSettings


class LoraScale(BaseModel):
    """One adapter's scale: an entry of a request's `lora` or of POST /lora-adapters."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    id: int
    # llama-server's default for an entry without one; bounded as --loramult is (a scale far
    # beyond makes the logits overflow).
    scale: float = Field(default=0.0, ge=-100.0, le=100.0)


class LoraAdapter(TypedDict):
    """One entry of GET /lora-adapters (llama-server's fields)."""

    id: int
    path: str
    scale: float
    task_name: str
    prompt_prefix: str


class LoraApplied(TypedDict):
    success: bool


_ENTRIES = TypeAdapter(list[LoraScale])
# POST /lora-adapters' body as /openapi.json documents it (the route reads its body itself,
# as every route does: server/dialects/pipeline/openapi.py).
ENTRIES_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": _ENTRIES.json_schema(ref_template="#/components/schemas/{model}")
            }
        },
    }
}


def adapters(settings: HearthSettings) -> list[LoraAdapter]:
    """The adapters with the scales every request gets now; [] without adapters."""
    scales = settings.lora_scales_now()
    listed: list[LoraAdapter] = []
    for index, ((path, _configured), scale) in enumerate(
        zip(settings.lora_adapters(), scales, strict=True)
    ):
        metadata = _metadata(path)  # one header read per adapter
        listed.append(
            {
                "id": index,
                "path": path,
                "scale": scale,
                "task_name": _text(metadata.get("adapter.lora.task_name")),
                "prompt_prefix": _text(metadata.get("adapter.lora.prompt_prefix")),
            }
        )
    return listed


def _metadata(path: str) -> dict[str, object]:
    try:
        return dict(gguf_summary(Path(path).expanduser()).metadata)
    except (GGUFFormatError, OSError):
        return {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def set_scales(settings: HearthSettings, entries: list[LoraScale], dialect: Dialect) -> None:
    """POST /lora-adapters: the scales every request gets from now on; an adapter the list
    does not name goes to 0, as llama-server's does."""
    chosen = scale_pairs(settings, entries, dialect)
    scales = dict(chosen)
    now = settings.lora_scales_now()
    now[:] = [scales.get(index, 0.0) for index in range(len(now))]


def scale_pairs(
    settings: HearthSettings, entries: list[LoraScale], dialect: Dialect
) -> tuple[tuple[int, float], ...]:
    """(id, scale) of each entry, in order; a 400 for an id the server has no adapter for."""
    count = len(settings.lora_scales_now())
    for entry in entries:
        if not 0 <= entry.id < count:
            known = f"0 to {count - 1}" if count else "none: the server has no LoRA adapters"
            raise APIError(400, f"invalid adapter id {entry.id} (ids: {known})", dialect=dialect)
    return tuple((entry.id, entry.scale) for entry in entries)


def with_lora(
    plan: ChatPlan, entries: list[LoraScale] | None, settings: HearthSettings, dialect: Dialect
) -> ChatPlan:
    """The plan with the request's own adapter scales (none, or an empty list: the server's,
    as llama-server reads an empty one)."""
    if not entries:
        return plan
    lora = scale_pairs(settings, entries, dialect)
    return replace(plan, generation=replace(plan.generation, lora=lora))


async def read_entries(request: Request, dialect: Dialect) -> list[LoraScale]:
    """POST /lora-adapters' body: a JSON array of {"id", "scale"}; a 4xx saying why not."""
    limit: int = request.app.state.max_request_bytes
    try:
        raw = await read_body(request, limit)
    except BodyTooLargeError:
        raise too_large_error(dialect, limit) from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise APIError(400, f"Request body is not valid JSON: {exc}", dialect=dialect) from None
    if not isinstance(data, list) or json_depth(data) > MAX_JSON_DEPTH:
        raise APIError(400, "Request body must be an array", dialect=dialect)
    try:
        return _ENTRIES.validate_python(data)
    except ValidationError as exc:
        raise APIError(400, describe_validation_error(exc), dialect=dialect) from None
