"""llama-server's Vertex AI prediction route (Google Cloud's custom-container contract).

With `AIP_MODE=PREDICTION` in the environment (Vertex AI sets it), `POST /predict` (or
`AIP_PREDICT_ROUTE`) takes `{"instances": [...]}`; each instance names one of the server's own
POST routes in `@requestFormat` (the route's camelCase name, `chatCompletions` for
`/v1/chat/completions`, or its path) and carries that route's body. The instances run at once,
each as its own request through the named route (the same planning, queue and answer as a
direct call: one skeleton per kind of route, never a copy), and the answer is
`{"predictions": [...]}` in their order: each route's own JSON answer, or an OpenAI-shaped
`{"error": ...}` for an instance that cannot be dispatched. `AIP_HEALTH_ROUTE` adds a spelling
of `/health`. Without `AIP_MODE=PREDICTION` none of this exists (a 404), as in llama-server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.routing import RouteContext, iter_route_contexts
from pydantic import BaseModel
from starlette.types import Message
from typing_extensions import TypedDict

from server.dialects.edge.bodies import parse_json_body
from server.dialects.edge.deps import key_required
from server.dialects.edge.errors import APIError, Dialect, ErrorKind, error_body
from server.dialects.pipeline.openapi import json_answer, json_body

OPENAI = Dialect.OPENAI
DEFAULT_PREDICT_PATH = "/predict"
# llama-server's bound: a body of more instances is refused whole.
MAX_INSTANCES = 128
_STREAMED_TYPES = ("text/event-stream", "application/x-ndjson")


class Predictions(TypedDict):
    predictions: list[Any]


class _Undispatchable(Exception):
    """An instance answered with an error in its place, not the whole request refused."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.BAD_INPUT) -> None:
        super().__init__(message)
        self.body = error_body(OPENAI, message, kind)


def install(app: FastAPI, environ: Mapping[str, str]) -> None:
    """Register the prediction route (and the health spelling) when `environ` asks for them."""
    if environ.get("AIP_MODE") != "PREDICTION":
        return
    app.add_api_route(
        _leading_slash(environ.get("AIP_PREDICT_ROUTE") or DEFAULT_PREDICT_PATH),
        predict,
        methods=["POST"],
        tags=["llama-server"],
        dependencies=[key_required(OPENAI)],
        openapi_extra=json_body(PredictRequest),
        response_model=None,
        responses=json_answer(Predictions),
    )
    health_path = environ.get("AIP_HEALTH_ROUTE")
    if health_path:
        health = next(route for route in _routes(app) if route.path == "/health")
        assert health.endpoint is not None
        app.add_api_route(_leading_slash(health_path), health.endpoint, methods=["GET"])


def _leading_slash(path: str) -> str:
    return path if path.startswith("/") else "/" + path


def format_name(path: str) -> str:
    """A route's `@requestFormat` name, llama-server's rule: `/v1` and the leading slash
    dropped, then camelCase at each `/`, `-` or `_` (`/apply-template` → `applyTemplate`)."""
    name = path[3:] if path.startswith("/v1") and len(path) > 3 else path
    words = name.removeprefix("/").split(":")[0]
    out: list[str] = []
    capital = False
    for char in words:
        if char in "/-_":
            capital = True
        else:
            out.append(char.upper() if capital else char)
            capital = False
    return "".join(out)


def _routes(app: FastAPI) -> Iterator[RouteContext]:
    """Every route of the app, included routers' too (FastAPI's own walk, as its OpenAPI's)."""
    return iter_route_contexts(app.routes)


def _post_paths(app: FastAPI) -> dict[str, str]:
    """Every POST route's format name → its path. Where two share a name (`/v1/embeddings`
    and `/embeddings`), the shorter path wins: llama-server's own spelling."""
    posts = (
        route.path
        for route in _routes(app)
        if "POST" in (route.methods or ()) and route.endpoint is not predict  # never itself
    )
    paths = sorted((path for path in posts if path is not None), key=len)
    names: dict[str, str] = {}
    for path in paths:
        if "{" not in path:  # a path with parameters has no one body to send
            names.setdefault(format_name(path), path)
    return names


async def predict(request: Request) -> Predictions:
    """Run each instance through the route it names, all at once; the predictions in order."""
    instances = _instances(await parse_json_body(request, PredictRequest, OPENAI))
    names = _post_paths(request.app)
    gone = asyncio.Event()  # the client left: every instance's request sees it leave
    watcher = asyncio.ensure_future(_watch_disconnect(request, gone))
    try:
        answers = await asyncio.gather(
            *(_predict_one(request, names, instance, gone) for instance in instances)
        )
    finally:
        watcher.cancel()
    return {"predictions": list(answers)}


class PredictRequest(BaseModel):
    """Vertex AI's prediction body: the instances, each one route's body."""

    instances: list[Any]


def _instances(body: PredictRequest) -> list[Any]:
    if len(body.instances) > MAX_INSTANCES:
        message = f"instances array exceeds maximum size of {MAX_INSTANCES}"
        raise APIError(400, message, dialect=OPENAI)
    return body.instances


async def _watch_disconnect(request: Request, gone: asyncio.Event) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _predict_one(
    request: Request, names: Mapping[str, str], instance: Any, gone: asyncio.Event
) -> Any:
    try:
        path, payload = _dispatch(names, instance)
        return await _call_route(request, path, payload, gone)
    except _Undispatchable as exc:
        return exc.body


def _dispatch(names: Mapping[str, str], instance: Any) -> tuple[str, dict[str, Any]]:
    """The path an instance names and the body it sends there (never a stream)."""
    if not isinstance(instance, dict):
        raise _Undispatchable("each instance must be a JSON object")
    form = instance.get("@requestFormat")
    if not isinstance(form, str):
        raise _Undispatchable("each instance must include a string @requestFormat")
    path = names.get(form) or (form if form in names.values() else None)
    if path is None:
        raise _Undispatchable(f"no handler registered for @requestFormat: {form}")
    payload = {key: value for key, value in instance.items() if key != "@requestFormat"}
    if "stream" in payload:  # llama-server's rule: a prediction is one whole answer
        payload["stream"] = False
    return path, payload


async def _call_route(
    request: Request, path: str, payload: dict[str, Any], gone: asyncio.Event
) -> Any:
    """Send `payload` to the app's route at `path` in-process, as its own request with this
    one's headers (key, client), and read its whole answer. The route's own exception
    handlers still answer its errors (they travel in the scope), so an error is that route's
    own error body."""
    body = json.dumps(payload).encode()
    headers = [
        (name, value)
        for name, value in request.scope["headers"]
        if name not in (b"content-length", b"content-type")
    ]
    headers += [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        **request.scope,
        "path": path,
        "raw_path": path.encode(),
        "headers": headers,
        "state": dict(request.scope.get("state", {})),
    }
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    answer = _Answer()
    await request.app.router(scope, receive, answer.send)
    return answer.value()


class _Answer:
    """One in-process route's response, collected whole."""

    def __init__(self) -> None:
        self.content_type = ""
        self.chunks: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            for name, value in message.get("headers", ()):
                if name.lower() == b"content-type":
                    self.content_type = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))

    def value(self) -> Any:
        if self.content_type.startswith(_STREAMED_TYPES):
            raise _Undispatchable("predict route does not support streaming responses")
        data = b"".join(self.chunks)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data.decode("utf-8", "replace")
