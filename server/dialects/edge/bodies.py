"""Request bodies, read here and never by FastAPI: bounded in size while they arrive, bounded
in nesting depth, with lone UTF-16 surrogates (valid JSON escapes, invalid text) replaced by
U+FFFD so that no later `encode()` can fail on them, the server's --gendefaults filled in, and
the fields Hearth does not use named once in the console. What goes wrong is answered in the
dialect's own error shape (errors.py).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from server.dialects.edge.errors import (
    APIError,
    Dialect,
    describe_validation_error,
    too_large_error,
    validation_status,
)
from server.dialects.edge.generation_defaults import with_generation_defaults

ModelT = TypeVar("ModelT", bound=BaseModel)
logger = logging.getLogger("hearth")

# Deeper JSON than any real request (tool schemas included) is refused before validation:
# recursive code further on (schema to grammar, templates) must never meet it.
MAX_JSON_DEPTH = 64


# JSON escapes of UTF-16 surrogates; only a lone one survives decoding as an invalid character.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class IgnoredFields:
    """Request fields Hearth accepts but does not use (clients send many): each name is logged
    once, so nobody believes a field is honoured when it is not, and at most `limit` names,
    so a client sending junk cannot flood the console."""

    def __init__(self, limit: int = 64) -> None:
        self._seen: set[str] = set()
        self._limit = limit

    def note(self, body: BaseModel, where: str) -> None:
        for name in _extra_names(body):
            if name in self._seen or len(self._seen) > self._limit:
                continue
            self._seen.add(name)
            if len(self._seen) > self._limit:
                logger.info("More unused request fields arrive; no longer listing them.")
            else:
                logger.info(
                    "Ignoring request field %r on %s (Hearth does not use it).", name, where
                )


def _extra_names(model: BaseModel, prefix: str = "") -> list[str]:
    """The unknown fields of `model` and of the models nested in it, as dotted names."""
    names = [prefix + name for name in model.model_extra or {}]
    for field_name in type(model).model_fields:
        value = getattr(model, field_name)
        items = value if isinstance(value, list) else [value]
        suffix = "[]." if isinstance(value, list) else "."
        for item in items:
            if isinstance(item, BaseModel):
                names += _extra_names(item, f"{prefix}{field_name}{suffix}")
    return list(dict.fromkeys(names))


class BodyTooLargeError(Exception):
    """A request body over `--maxrequestsize`."""


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused as soon as it is known to exceed `limit` bytes: at once by its
    Content-Length, or while a chunked body arrives, so an oversized one is never held whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError
        parts.append(chunk)
    return b"".join(parts)


async def parse_json_body(
    request: Request,
    model: type[ModelT],
    dialect: Dialect = Dialect.KOBOLD,
    *,
    optional: bool = False,
) -> ModelT:
    """Read and validate a request body, raising a clear 4xx instead of a 500.

    `optional` lets an empty body stand for `{}` (e.g. a bare POST to /check or /abort).
    """
    limit: int = request.app.state.max_request_bytes
    try:
        raw = await read_body(request, limit)
    except BodyTooLargeError:
        raise too_large_error(dialect, limit) from None
    if not raw.strip():
        if optional:
            return model.model_validate({})
        raise APIError(400, "Request body is empty; expected a JSON object.", dialect=dialect)
    too_deep = f"Request body is nested too deeply (more than {MAX_JSON_DEPTH} levels)."
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(400, f"Request body is not valid JSON: {exc}", dialect=dialect) from None
    except RecursionError:  # deeper than the decoder itself goes
        raise APIError(400, too_deep, dialect=dialect) from None
    if json_depth(data) > MAX_JSON_DEPTH:
        raise APIError(400, too_deep, dialect=dialect)
    if not isinstance(data, dict):
        raise APIError(400, "Request body must be a JSON object.", dialect=dialect)
    if _SURROGATE_ESCAPE.search(raw):
        data = replace_lone_surrogates(data)
    try:
        body = model.model_validate(data)
    except ValidationError as exc:
        status = validation_status(dialect)
        raise APIError(status, describe_validation_error(exc), dialect=dialect) from None
    body = _with_server_defaults(request, model, data, body, dialect)
    ignored: IgnoredFields = request.app.state.ignored_fields
    ignored.note(body, request.url.path)
    return body


def _with_server_defaults(
    request: Request, model: type[ModelT], data: dict[str, Any], body: ModelT, dialect: Dialect
) -> ModelT:
    """The body with --gendefaults filled in (server/dialects/edge/generation_defaults.py), read
    again; the request was checked as the client sent it first, so a default that does not
    fit is the server's error, and said so."""
    settings = getattr(request.app.state, "settings", None)
    if settings is None or not settings.gendefaults:
        return body
    merged = with_generation_defaults(
        data, model, settings.gendefaults, settings.gendefaultsoverwrite
    )
    if merged is data:
        return body
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        problem = describe_validation_error(exc)
        message = f"The server's --gendefaults do not fit: {problem}"
        raise APIError(500, message, dialect=dialect) from None


def json_depth(value: Any) -> int:
    """How deeply containers nest in decoded JSON (a scalar is 0), without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
        pending.extend((child, depth) for child in item)
    return deepest


def replace_lone_surrogates(value: Any) -> Any:
    """A copy of decoded JSON whose strings (keys too) have lone surrogates as U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [replace_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {replace_lone_surrogates(k): replace_lone_surrogates(v) for k, v in value.items()}
    return value
