"""Errors before the first byte: real HTTP status codes with KoboldCpp's body shape.

KoboldCpp answers `{"detail": {"msg": ..., "type": ...}}` and sends malformed JSON back as a
500; Hearth keeps the shape but uses honest codes (400 for unparseable input, 422 for fields of
the wrong type, 503 for a full queue).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

BUSY_MESSAGE = "Server is busy; please try again later."
UNAUTHORIZED_BODY: dict[str, Any] = {
    "detail": {
        "error": "Unauthorized",
        "msg": "Authentication key is missing or invalid.",
        "type": "unauthorized",
    }
}

ModelT = TypeVar("ModelT", bound=BaseModel)


class APIError(Exception):
    """Raised by route code; the app's handler turns it into a JSON error response."""

    def __init__(self, status: int, message: str, kind: str, body: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.body = body if body is not None else {"detail": {"msg": message, "type": kind}}


def busy_error() -> APIError:
    """The queue-full refusal, with KoboldCpp's exact body (clients match on it)."""
    return APIError(503, BUSY_MESSAGE, "service_unavailable")


def unauthorized_error() -> APIError:
    return APIError(
        401, "Authentication key is missing or invalid.", "unauthorized", body=UNAUTHORIZED_BODY
    )


async def parse_json_body(
    request: Request, model: type[ModelT], *, optional: bool = False
) -> ModelT:
    """Read and validate a request body, raising a clear 400/422 instead of a 500.

    `optional` lets an empty body stand for `{}` (e.g. a bare POST to /check or /abort).
    """
    raw = await request.body()
    if not raw.strip():
        if optional:
            return model.model_validate({})
        raise APIError(400, "Request body is empty; expected a JSON object.", "bad_input")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(400, f"Request body is not valid JSON: {exc}", "bad_input") from None
    if not isinstance(data, dict):
        raise APIError(400, "Request body must be a JSON object.", "bad_input")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise APIError(422, describe_validation_error(exc), "bad_input") from None


def describe_validation_error(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or 'body'}: {err['msg']}"
        for err in exc.errors()
    )


async def api_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return JSONResponse(exc.body, status_code=exc.status)
