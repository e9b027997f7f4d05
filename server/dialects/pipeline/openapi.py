"""Request bodies in the OpenAPI schema, although routes read their bodies themselves.

Routes parse bodies with `bodies.parse_json_body` (size limit, depth limit, each dialect's
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
from pydantic import BaseModel, TypeAdapter

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
    """Make `app.openapi()` hoist every request model's `$defs` into the components, beside
    the answers' schemas (`json_answer`)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, routes=app.routes, tags=app.openapi_tags
            )
            schema = copy.deepcopy(schema)  # the route decorators' dicts stay untouched
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            answers, definitions = _answer_schemas()
            components.update(definitions)
            for path_item in schema.get("paths", {}).values():
                for operation in path_item.values():
                    _fill_answers(operation, answers)
                    body = _json_schema(operation.get("requestBody", {}))
                    if body is not None:
                        components.update(body.pop("$defs", {}))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _json_schema(part: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request body or an answer documents, if any."""
    schema = part.get("content", {}).get("application/json", {}).get("schema")
    return schema if isinstance(schema, dict) else None


# The answer types routes document, by a key that stands in their schemas until
# `/openapi.json` is built: all are generated together then, so that two of the same name
# (OpenAI's and Ollama's `AssistantMessage`) get names of their own, as FastAPI would give.
_ANSWER_TYPES: dict[str, Any] = {}
_ANSWER_KEY = "x-hearth-answer"


def json_answer(model: Any) -> dict[int | str, dict[str, Any]]:
    """`responses` for a route that returns a `Response` itself: its JSON answer (when not
    streamed) is `model`, a TypedDict, so clients and the fuzzer know its shape.

    Not FastAPI's `{"model": …}`: FastAPI would build a pydantic field for it in every app on
    its first request (TypedDicts are not cached as classes are), a fifth of a scripted
    test's CPU for a shape only `/openapi.json` reads."""
    key = f"{model.__module__}.{model.__qualname__}"
    _ANSWER_TYPES[key] = model
    schema = {_ANSWER_KEY: key}
    content = {"application/json": {"schema": schema}}
    return {200: {"description": "The answer, when not streamed", "content": content}}


def _answer_schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    """Each answer type's schema (a `$ref`) by its key, and the definitions they refer to."""
    inputs = [(key, "serialization", TypeAdapter(model)) for key, model in _ANSWER_TYPES.items()]
    schemas, top = TypeAdapter.json_schemas(inputs, ref_template=_REF_TEMPLATE)  # type: ignore[arg-type]
    definitions: dict[str, Any] = top.get("$defs", {})
    return {key: schema for (key, _), schema in schemas.items()}, definitions


def _fill_answers(operation: dict[str, Any], answers: dict[str, Any]) -> None:
    for answer in operation.get("responses", {}).values():
        schema = _json_schema(answer)
        if schema is not None and _ANSWER_KEY in schema:
            answer["content"]["application/json"]["schema"] = answers[schema[_ANSWER_KEY]]
