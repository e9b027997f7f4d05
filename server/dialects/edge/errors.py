"""Errors before the first byte: real HTTP status codes, in each dialect's own error shape.

KoboldCpp answers `{"detail": {"msg": ..., "type": ...}}` for everything and sends malformed
JSON and oversized bodies back as a 500; Hearth uses honest codes (400 unparseable or invalid,
413 too large, 401, 404, 503; KoboldAI keeps 422 for wrong field types, as KoboldCpp's FastAPI
heritage has it) and the shape each client parses: OpenAI `{"error": {...}}`, Anthropic
`{"type": "error", "error": {...}}`, Ollama `{"error": "..."}`. The queue-full 503 keeps
KoboldCpp's exact body in every dialect, as KoboldCpp documents it.

Bodies are read here, never by FastAPI: bounded in size while they arrive, bounded in nesting
depth, and with lone UTF-16 surrogates (valid JSON escapes, invalid text) replaced by U+FFFD so
that no later `encode()` can fail on them.
"""

from __future__ import annotations

import enum
import json
import logging
import re
from typing import Any, Literal, NotRequired, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from typing_extensions import TypedDict

from server.dialects.edge.generation_defaults import with_generation_defaults

BUSY_MESSAGE = "Server is busy; please try again later."
UNAUTHORIZED_MESSAGE = "Authentication key is missing or invalid."

ModelT = TypeVar("ModelT", bound=BaseModel)
logger = logging.getLogger("hearth")


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
# Deeper JSON than any real request (tool schemas included) is refused before validation:
# recursive code further on (schema to grammar, templates) must never meet it.
MAX_JSON_DEPTH = 64
# JSON escapes of UTF-16 surrogates; only a lone one survives decoding as an invalid character.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


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


def too_large_error(dialect: Dialect, limit: int) -> APIError:
    megabytes = limit / (1024 * 1024)
    message = f"Request body is too large: the limit is {megabytes:g} MB (--maxrequestsize)."
    return APIError(413, message, ErrorKind.TOO_LARGE, dialect)


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
