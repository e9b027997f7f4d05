"""Each route package registers its own routes (its `install.py`), listed once in
`server/process/app.py`'s ROUTE_INSTALLERS: every router a dialect module defines is served,
and app.py includes no router itself."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from typing import Any

from fastapi import APIRouter

import server.dialects
from server.process.app import ROUTE_INSTALLERS, create_app
from server.settings.config import HearthSettings
from tests.support.scripted_engine import ScriptedEngine

ROOT = Path(__file__).resolve().parents[3]


def served_routers(routes: list[Any]) -> set[int]:
    """The ids of every router included in `routes`, however deep."""
    found: set[int] = set()
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            found.add(id(included))
            found |= served_routers(included.routes)
    return found


def dialect_routers() -> dict[str, APIRouter]:
    routers = {}
    for info in pkgutil.walk_packages(server.dialects.__path__, "server.dialects."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, APIRouter) and value.routes:
                routers.setdefault(f"{info.name}.{name}", value)
    return routers


def test_every_router_a_dialect_module_defines_is_served() -> None:
    app = create_app(HearthSettings(quiet=True), ScriptedEngine())
    served = served_routers(app.routes)
    missing = [name for name, router in dialect_routers().items() if id(router) not in served]
    assert missing == []


def test_app_includes_no_router_itself_and_lists_each_installer_once() -> None:
    tree = ast.parse((ROOT / "server" / "process" / "app.py").read_text(encoding="utf-8"))
    calls = [
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]
    assert "include_router" not in calls
    modules = [install.__module__ for install in ROUTE_INSTALLERS]
    assert len(modules) == len(set(modules)) == 6
    assert all(module.endswith(".install") for module in modules)
