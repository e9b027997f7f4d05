"""What each dialect's error body looks like, for tests that check "the dialect's own shape"."""

from __future__ import annotations

from typing import Any

from server.dialects.edge.errors import dialect_for_path

# Which dialect a path belongs to, as the server decides it (server/dialects/edge/errors.py).
TEXT_ENDPOINTS = {
    "/api/v1/generate": "kobold",
    "/api/extra/generate/stream": "kobold",
    "/v1/completions": "openai",
    "/v1/chat/completions": "openai",
    "/v1/responses": "openai",
    "/v1/messages": "anthropic",
    "/api/generate": "ollama",
    "/api/chat": "ollama",
}


def dialect_of(path: str) -> str:
    """The server's own rule (a templated path such as `/slots/{id_slot}` included)."""
    return dialect_for_path(path).value


def shape_problem(dialect: str, body: Any) -> str | None:
    """None when `body` is an error in `dialect`'s documented shape, else what is wrong."""
    if not isinstance(body, dict):
        return f"not a JSON object: {body!r}"
    if dialect == "openai":
        error = body.get("error")
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            return f"no error.message: {body!r}"
        if not isinstance(error.get("type"), str):
            return f"no error.type: {body!r}"
        return None
    if dialect == "anthropic":
        error = body.get("error")
        if body.get("type") != "error" or not isinstance(error, dict):
            return f"not {{'type': 'error', 'error': {{...}}}}: {body!r}"
        if not isinstance(error.get("type"), str) or not isinstance(error.get("message"), str):
            return f"no error.type/error.message: {body!r}"
        return None
    if dialect == "ollama":
        return None if isinstance(body.get("error"), str) else f"no error string: {body!r}"
    detail = body.get("detail")
    if not isinstance(detail, dict) or not isinstance(detail.get("msg"), str):
        return f"no detail.msg: {body!r}"
    return None


def assert_error_shape(path: str, body: Any) -> None:
    problem = shape_problem(dialect_of(path), body)
    assert problem is None, f"{path}: {problem}"
