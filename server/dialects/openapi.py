"""Request bodies in the OpenAPI schema, although routes read their bodies themselves.

Routes parse bodies with `errors.parse_json_body` (size limit, depth limit, each dialect's
error shape), so FastAPI does not see a body parameter and would leave `/openapi.json`
without one. `json_body(Model)` documents it on the route; `document_request_models` moves
the models' shared definitions into `components/schemas`, where `$ref`s can find them. The
schema is what clients' code generators and the fuzzer (tests/fuzz) build requests from.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

_REF_TEMPLATE = "#/components/schemas/{model}"


def json_body(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """`openapi_extra` for a route whose JSON body is `model`."""
    schema = model.model_json_schema(ref_template=_REF_TEMPLATE)
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": schema}},
        }
    }


def document_request_models(app: FastAPI) -> None:
    """Make `app.openapi()` hoist every request model's `$defs` into the components."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, routes=app.routes, tags=app.openapi_tags
            )
            schema = copy.deepcopy(schema)  # the route decorators' dicts stay untouched
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for path_item in schema.get("paths", {}).values():
                for operation in path_item.values():
                    content = operation.get("requestBody", {}).get("content", {})
                    body = content.get("application/json", {}).get("schema")
                    if isinstance(body, dict):
                        components.update(body.pop("$defs", {}))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def json_answer(model: Any) -> dict[int | str, dict[str, Any]]:
    """`responses` for a route that returns a `Response` itself: its JSON answer (when not
    streamed) is `model`, a TypedDict, so clients and the fuzzer know its shape."""
    return {200: {"model": model, "description": "The answer, when not streamed"}}
