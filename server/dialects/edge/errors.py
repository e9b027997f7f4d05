"""Errors before the first byte: real HTTP status codes, in each dialect's own error shape.

KoboldCpp answers `{"detail": {"msg": ..., "type": ...}}` for everything and sends malformed
JSON and oversized bodies back as a 500; Hearth uses honest codes (400 unparseable or invalid,
413 too large, 401, 404, 503; KoboldAI keeps 422 for wrong field types, as KoboldCpp's FastAPI
heritage has it) and the shape each client parses: OpenAI `{"error": {...}}`, Anthropic
`{"type": "error", "error": {...}}`, Ollama `{"error": "..."}`. The queue-full 503 keeps
KoboldCpp's exact body in every dialect, as KoboldCpp documents it.

Request bodies are read in bodies.py (beside this module), which raises these errors.
"""

from __future__ import annotations

import enum
from typing import Any, Literal, NotRequired

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from typing_extensions import TypedDict

BUSY_MESSAGE = "Server is busy; please try again later."
UNAUTHORIZED_MESSAGE = "Authentication key is missing or invalid."


class Dialect(enum.Enum):
    KOBOLD = "kobold"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    OLLAMA = "ollama"


class ErrorKind(enum.Enum):
    BAD_INPUT = "bad_input"
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not_found"
    TOO_LARGE = "request_too_large"
    SERVER = "server_error"


_OPENAI_TYPES = {
    ErrorKind.BAD_INPUT: "invalid_request_error",
    ErrorKind.UNAUTHORIZED: "invalid_request_error",
    ErrorKind.NOT_FOUND: "invalid_request_error",
    ErrorKind.TOO_LARGE: "invalid_request_error",
    ErrorKind.SERVER: "server_error",
}
_ANTHROPIC_TYPES = {
    ErrorKind.BAD_INPUT: "invalid_request_error",
    ErrorKind.UNAUTHORIZED: "authentication_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.TOO_LARGE: "request_too_large",
    ErrorKind.SERVER: "api_error",
}


# llama-server's own routes answer errors in the OpenAI shape, as llama-server does.
LLAMA_SERVER_PATHS = frozenset(
    {"/completions", "/chat/completions", "/tokenize", "/detokenize", "/apply-template"}
    | {"/health", "/props", "/completion", "/slots", "/metrics", "/embeddings"}
    | {"/chat/completions/input_tokens", "/responses/input_tokens", "/lora-adapters"}
    | {"/infill", "/rerank", "/reranking", "/cors-proxy", "/responses"}
    | {"/tools"}  # --tools and MCP servers (server/dialects/llama/tool_routes.py)
    | {"/models", "/models/load", "/models/unload"}
    | {"/predict"}  # Vertex AI's prediction route (AIP_PREDICT_ROUTE may move it)
)


def dialect_for_path(path: str) -> Dialect:
    """Which API a path belongs to, for errors raised before a route runs (size, 404, 405)."""
    if path.startswith("/v1/messages"):
        return Dialect.ANTHROPIC
    if path.startswith(("/v1/", "/slots/")) or path in LLAMA_SERVER_PATHS:
        return Dialect.OPENAI
    if path.startswith("/api/") and not path.startswith(("/api/v1/", "/api/extra/", "/api/admin/")):
        return Dialect.OLLAMA
    return Dialect.KOBOLD


def validation_status(dialect: Dialect) -> int:
    """OpenAI, Anthropic and Ollama answer an invalid request with 400; KoboldCpp with 422."""
    return 422 if dialect is Dialect.KOBOLD else 400


class OpenAIErrorDetail(TypedDict):
    message: str
    type: str
    param: None
    code: str | None


class OpenAIErrorBody(TypedDict):
    error: OpenAIErrorDetail


class AnthropicErrorDetail(TypedDict):
    type: str
    message: str


class AnthropicErrorBody(TypedDict):
    type: Literal["error"]
    error: AnthropicErrorDetail


class OllamaErrorBody(TypedDict):
    error: str


class KoboldErrorDetail(TypedDict):
    msg: str
    type: str
    error: NotRequired[str]


class KoboldErrorBody(TypedDict):
    detail: KoboldErrorDetail


ErrorBody = OpenAIErrorBody | AnthropicErrorBody | OllamaErrorBody | KoboldErrorBody


def error_body(dialect: Dialect, message: str, kind: ErrorKind) -> ErrorBody:
    """The JSON body of an error in `dialect`'s shape (also used in-band in streams)."""
    if dialect is Dialect.OPENAI:
        code = "invalid_api_key" if kind is ErrorKind.UNAUTHORIZED else None
        detail: OpenAIErrorDetail = {
            "message": message,
            "type": _OPENAI_TYPES[kind],
            "param": None,
            "code": code,
        }
        return {"error": detail}
    if dialect is Dialect.ANTHROPIC:
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES[kind], "message": message}}
    if dialect is Dialect.OLLAMA:
        return {"error": message}
    kobold: KoboldErrorDetail = {"msg": message, "type": kind.value}
    if kind is ErrorKind.UNAUTHORIZED:
        kobold["error"] = "Unauthorized"  # KoboldCpp's exact 401 body
    return {"detail": kobold}


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


def context_overflow_error(sizes: tuple[int, int], message: str, dialect: Dialect) -> APIError:
    """A prompt longer than the context, refused: in the OpenAI shape, llama-server's type and
    the two sizes (which its clients read) with OpenAI's code."""
    if dialect is not Dialect.OPENAI:
        return APIError(400, message, ErrorKind.BAD_INPUT, dialect)
    prompt_tokens, context = sizes
    detail: dict[str, Any] = {"message": message, "type": "exceed_context_size_error"}
    detail |= {"param": None, "code": "context_length_exceeded"}
    detail |= {"n_prompt_tokens": prompt_tokens, "n_ctx": context}
    return APIError(400, message, ErrorKind.BAD_INPUT, dialect, body={"error": detail})


def unauthorized_error(dialect: Dialect) -> APIError:
    return APIError(401, UNAUTHORIZED_MESSAGE, ErrorKind.UNAUTHORIZED, dialect)


def too_large_error(dialect: Dialect, limit: int) -> APIError:
    megabytes = limit / (1024 * 1024)
    message = f"Request body is too large: the limit is {megabytes:g} MB (--maxrequestsize)."
    return APIError(413, message, ErrorKind.TOO_LARGE, dialect)


def describe_validation_error(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or 'body'}: {err['msg']}"
        for err in exc.errors()
    )


async def api_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return JSONResponse(exc.body, status_code=exc.status)


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own errors (unknown path 404, wrong method 405) in the path's dialect."""
    assert isinstance(exc, HTTPException)
    kind = ErrorKind.NOT_FOUND if exc.status_code == 404 else ErrorKind.BAD_INPUT
    dialect = dialect_for_path(request.url.path)
    body = error_body(dialect, str(exc.detail), kind)
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def request_validation_handler(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's validation of query and path parameters, in the path's dialect."""
    assert isinstance(exc, RequestValidationError)
    dialect = dialect_for_path(request.url.path)
    message = "; ".join(
        f"{'.'.join(str(part) for part in err['loc'])}: {err['msg']}" for err in exc.errors()
    )
    body = error_body(dialect, message, ErrorKind.BAD_INPUT)
    return JSONResponse(body, status_code=validation_status(dialect))
