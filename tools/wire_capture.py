"""Capture what every dialect puts on the wire for a fixed set of scripted requests, so a
restructuring can be shown to change no byte: run it before and after, and compare.

    python tools/wire_capture.py OUT.json          # capture (a scripted engine, in process)
    python tools/wire_capture.py --compare A B     # exit 1 and print each difference

The engine is the scripted one (tests/support/scripted_engine.py), so the replies are the same
each run; what differs from run to run anyway (response ids, timestamps, durations) is
replaced by placeholders before anything is written. The route table (each path and method,
and the name of the handler that answers it first) is captured too.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
HI = [{"role": "user", "content": "Hi"}]

# (method, path, body): every dialect, whole and streamed, errors included.
REQUESTS: list[tuple[str, str, Any]] = [
    ("POST", "/api/v1/generate", {"prompt": "Once", "max_length": 4}),
    ("POST", "/api/extra/generate/stream", {"prompt": "Once", "max_length": 4}),
    ("POST", "/api/v1/generate", {"prompt": 5}),
    ("POST", "/api/v1/generate", "not json"),
    ("GET", "/api/v1/model", None),
    ("GET", "/api/extra/version", None),
    ("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 4}),
    ("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 4, "stream": True}),
    ("POST", "/v1/chat/completions", {"messages": HI, "max_tokens": 4}),
    ("POST", "/v1/chat/completions", {"messages": HI, "max_tokens": 4, "stream": True}),
    ("POST", "/v1/chat/completions", {"messages": HI, "tools": TOOLS, "tool_choice": "required"}),
    ("POST", "/v1/chat/completions", {"messages": "nope"}),
    ("POST", "/v1/responses", {"input": "Hi", "max_output_tokens": 4}),
    ("POST", "/v1/responses", {"input": "Hi", "max_output_tokens": 4, "stream": True}),
    ("GET", "/v1/models", None),
    ("POST", "/v1/messages", {"model": "m", "messages": HI, "max_tokens": 4}),
    ("POST", "/v1/messages", {"model": "m", "messages": HI, "max_tokens": 4, "stream": True}),
    ("POST", "/v1/messages", {"model": "m", "max_tokens": 4}),
    ("POST", "/api/generate", {"model": "m", "prompt": "Once", "options": {"num_predict": 4}}),
    ("POST", "/api/chat", {"model": "m", "messages": HI, "options": {"num_predict": 4}}),
    ("POST", "/api/chat", {"model": "m", "messages": HI, "stream": False}),
    ("GET", "/api/tags", None),
    ("POST", "/completion", {"prompt": "Once", "n_predict": 4}),
    ("POST", "/completion", {"prompt": "Once", "n_predict": 4, "stream": True}),
    ("POST", "/tokenize", {"content": "Once upon"}),
    ("GET", "/props", None),
    ("GET", "/health", None),
    ("POST", "/v1/embeddings", {"input": "Once"}),
    ("POST", "/api/embed", {"model": "m", "input": "Once"}),
    ("GET", "/no/such/path", None),
]

# What differs between runs: ids, times and durations, replaced by what they are.
_VOLATILE = [
    (re.compile(rb"(chatcmpl|cmpl|resp|msg|call|rs|fc|kai-stream)[-_][A-Za-z0-9]{6,}"), rb"\1-ID"),
    (re.compile(rb'"(created|created_at|timestamp)":\s*[0-9.]+'), rb'"\1":T'),
    (re.compile(rb'"created_at":\s*"[^"]*"'), rb'"created_at":"T"'),
    (
        re.compile(rb'"([a-z_]*(ms|_duration|per_second|per_token_ms|_n_ms))":\s*[0-9.e+-]+'),
        rb'"\1":D',
    ),
    (re.compile(rb'"(predicted_per_second|prompt_per_second)":\s*[0-9.e+-]+'), rb'"\1":D'),
    (re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), rb"UUID"),
]
_KEPT_HEADERS = ("content-type", "cache-control", "x-accel-buffering")


def steady(data: bytes) -> str:
    for pattern, replacement in _VOLATILE:
        data = pattern.sub(replacement, data)
    return data.decode("utf-8", "replace")


def capture() -> dict[str, Any]:
    from server.settings.config import HearthSettings
    from tests.support.scripted_engine import ScriptedEngine
    from tests.support.servers import serve_in_thread

    server = serve_in_thread(ScriptedEngine(), HearthSettings(quiet=True, seed=1234))
    answers = []
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            for method, path, body in REQUESTS:
                content = body if isinstance(body, str) else None
                payload = None if isinstance(body, str) or body is None else body
                reply = client.request(method, path, json=payload, content=content)
                headers = {k: reply.headers[k] for k in _KEPT_HEADERS if k in reply.headers}
                answers.append(
                    {
                        "request": f"{method} {path} {json.dumps(body)}",
                        "status": reply.status_code,
                        "headers": headers,
                        "body": steady(reply.content),
                    }
                )
    finally:
        server.shut_down()
    return {"answers": answers, "routes": route_table()}


def route_table() -> list[str]:
    """Each (path, method) and the name of the handler registered for it first (the one
    Starlette dispatches to)."""
    from server.process.app import create_app
    from server.settings.config import HearthSettings
    from tests.support.scripted_engine import ScriptedEngine

    app = create_app(HearthSettings(quiet=True), ScriptedEngine())
    seen: dict[tuple[str, str], str] = {}
    for path, methods, name in _flat_routes(app.routes, ""):
        for method in methods:
            seen.setdefault((path, method), name)
    return [f"{method} {path} -> {name}" for (path, method), name in sorted(seen.items())]


def _flat_routes(routes: list[Any], prefix: str) -> list[tuple[str, list[str], str]]:
    """Routes in the order Starlette tries them, included routers opened (FastAPI keeps an
    included router whole, with its prefix beside it)."""
    flat = []
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            flat += _flat_routes(included.routes, prefix + route.include_context.prefix)
            continue
        methods = sorted(getattr(route, "methods", None) or {"*"})
        name = getattr(getattr(route, "endpoint", None), "__name__", "?")
        flat.append((prefix + getattr(route, "path", "?"), methods, name))
    return flat


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    differences = []
    for old, new in zip(before["answers"], after["answers"], strict=True):
        if old != new:
            differences.append(f"{old['request']}:\n  before {old}\n  after  {new}")
    gone = sorted(set(before["routes"]) - set(after["routes"]))
    added = sorted(set(after["routes"]) - set(before["routes"]))
    differences += [f"route gone: {r}" for r in gone] + [f"route new: {r}" for r in added]
    return differences


def main(argv: list[str]) -> int:
    if argv[:1] == ["--compare"]:
        before, after = (json.loads(Path(p).read_text()) for p in argv[1:3])
        differences = compare(before, after)
        print(
            "\n".join(differences)
            or f"same bytes: {len(before['answers'])} answers, {len(before['routes'])} routes"
        )
        return 1 if differences else 0
    Path(argv[0]).write_text(json.dumps(capture(), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
