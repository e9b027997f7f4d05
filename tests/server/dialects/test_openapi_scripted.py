"""`/openapi.json`: every `$ref` resolves, and each non-streamed answer names its own shape
(two dialects' types of one name, OpenAI's and Ollama's `AssistantMessage`, stay two)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _answer(schema: dict[str, Any], path: str) -> dict[str, Any]:
    ref = schema["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
    name = ref["schema"]["$ref"].rsplit("/", 1)[1]
    found: dict[str, Any] = schema["components"]["schemas"][name]
    return found


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_every_reference_resolves_and_answers_keep_their_own_shapes(
    serve_engine: Callable[..., RunningServer],
) -> None:
    server = serve_engine(ScriptedEngine())
    with server.client() as client:
        schema = client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    missing = {ref for ref in _refs(schema) if ref.rsplit("/", 1)[1] not in components}
    assert not missing
    openai = _answer(schema, "/v1/chat/completions")
    ollama = _answer(schema, "/api/chat")
    anthropic = _answer(schema, "/v1/messages")
    assert {"choices", "usage"} <= set(openai["properties"])
    assert {"message", "done"} <= set(ollama["properties"])
    assert anthropic["properties"]["type"]["const"] == "message"
    choice = _resolve(schema, openai["properties"]["choices"]["items"])
    openai_message = _resolve(schema, choice["properties"]["message"])
    ollama_message = _resolve(schema, ollama["properties"]["message"])
    assert "refusal" in openai_message["properties"]  # OpenAI's own, not Ollama's
    assert openai_message != ollama_message
