"""Errors before the first byte: real HTTP status codes, in each dialect's own error shape.

KoboldCpp answers `{"detail": {"msg": ..., "type": ...}}` for everything and sends malformed
JSON back as a 500; Hearth uses honest codes (400 unparseable, 422 wrong field types, 401, 503)
and the shape each client parses: OpenAI `{"error": {...}}`, Anthropic
`{"type": "error", "error": {...}}`, Ollama `{"error": "..."}`. The queue-full 503 keeps
KoboldCpp's exact body in every dialect, as KoboldCpp documents it.
"""

from __future__ import annotations

import enum
import json
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

BUSY_MESSAGE = "Server is busy; please try again later."
UNAUTHORIZED_MESSAGE = "Authentication key is missing or invalid."

ModelT = TypeVar("ModelT", bound=BaseModel)


class Dialect(enum.Enum):
    KOBOLD = "kobold"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    OLLAMA = "ollama"


class ErrorKind(enum.Enum):
    BAD_INPUT = "bad_input"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    SERVER = "server_error"


_OPENAI_TYPES = {
    ErrorKind.BAD_INPUT: "invalid_request_error",
    ErrorKind.UNAUTHORIZED: "invalid_request_error",
    ErrorKind.NOT_FOUND: "invalid_request_error",
    ErrorKind.SERVER: "server_error",
}
_ANTHROPIC_TYPES = {
    ErrorKind.BAD_INPUT: "invalid_request_error",
    ErrorKind.UNAUTHORIZED: "authentication_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.SERVER: "api_error",
}


def error_body(dialect: Dialect, message: str, kind: ErrorKind) -> dict[str, Any]:
    """The JSON body of an error in `dialect`'s shape (also used in-band in streams)."""
    if dialect is Dialect.OPENAI:
        code = "invalid_api_key" if kind is ErrorKind.UNAUTHORIZED else None
        return {
            "error": {"message": message, "type": _OPENAI_TYPES[kind], "param": None, "code": code}
        }
    if dialect is Dialect.ANTHROPIC:
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES[kind], "message": message}}
    if dialect is Dialect.OLLAMA:
        return {"error": message}
    detail: dict[str, Any] = {"msg": message, "type": kind.value}
    if kind is ErrorKind.UNAUTHORIZED:
        detail = {"error": "Unauthorized", **detail}  # KoboldCpp's exact 401 body
    return {"detail": detail}


class APIError(Exception):
    """Raised by route code; the app's handler turns it into a JSON error response."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: ErrorKind = ErrorKind.BAD_INPUT,
        dialect: Dialect = Dialect.KOBOLD,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body if body is not None else error_body(dialect, message, kind)


def busy_error() -> APIError:
    """The queue-full refusal, with KoboldCpp's exact body (clients match on it)."""
    body = {"detail": {"msg": BUSY_MESSAGE, "type": "service_unavailable"}}
    return APIError(503, BUSY_MESSAGE, ErrorKind.SERVER, body=body)


def unauthorized_error(dialect: Dialect) -> APIError:
    return APIError(401, UNAUTHORIZED_MESSAGE, ErrorKind.UNAUTHORIZED, dialect)


async def parse_json_body(
    request: Request,
    model: type[ModelT],
    dialect: Dialect = Dialect.KOBOLD,
    *,
    optional: bool = False,
) -> ModelT:
    """Read and validate a request body, raising a clear 400/422 instead of a 500.

    `optional` lets an empty body stand for `{}` (e.g. a bare POST to /check or /abort).
    """
    raw = await request.body()
    if not raw.strip():
        if optional:
            return model.model_validate({})
        raise APIError(400, "Request body is empty; expected a JSON object.", dialect=dialect)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(400, f"Request body is not valid JSON: {exc}", dialect=dialect) from None
    if not isinstance(data, dict):
        raise APIError(400, "Request body must be a JSON object.", dialect=dialect)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise APIError(422, describe_validation_error(exc), dialect=dialect) from None


def describe_validation_error(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or 'body'}: {err['msg']}"
        for err in exc.errors()
    )


async def api_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return JSONResponse(exc.body, status_code=exc.status)
