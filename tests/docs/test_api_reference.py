"""docs/API.md names every route the server has: a new endpoint cannot go undocumented.

The routes are read from the `APIRouter`s of the dialect modules (no app, engine or model is
built), so the test is fast and independent of how `create_app` assembles them.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

from fastapi import APIRouter
from fastapi.routing import APIRoute

import server.dialects

ROOT = Path(__file__).resolve().parents[2]


def _dialect_routes() -> set[str]:
    paths: set[str] = set()
    package = server.dialects
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, APIRouter):
                paths.update(r.path for r in value.routes if isinstance(r, APIRoute))
    return paths


def test_the_dialect_modules_have_routes() -> None:
    assert {"/v1/chat/completions", "/api/extra/generate/stream", "/completion"} <= (
        _dialect_routes()
    )


def _named(path: str, reference: str) -> bool:
    """Whether `reference` writes `path` as a whole path (`/api/embed` is not `/api/embeddings`);
    a path with a parameter (`/api/extra/stream/{name}`) by its fixed start."""
    fixed, parameter, _ = path.partition("{")
    end = "" if parameter else r"(?![\w/-])"
    return re.search(rf"(?<![\w/.-]){re.escape(fixed)}{end}", reference) is not None


def test_every_route_is_in_the_api_reference() -> None:
    reference = (ROOT / "docs" / "API.md").read_text(encoding="utf-8")
    missing = sorted(path for path in _dialect_routes() if not _named(path, reference))
    assert not missing, f"docs/API.md does not name {missing}"
