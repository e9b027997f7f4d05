"""Each fixture name is defined once across the test tree (docs/ARCHITECTURE.md, "Tests"): two
fixtures of one name in two modules read alike in a test's signature and are not alike."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def fixture_definitions(root: Path) -> dict[str, list[str]]:
    """Every fixture name under `root`, with where each definition is (`path:line`)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(map(_is_fixture, node.decorator_list)):
                found[node.name].append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_fixture_name_is_defined_once() -> None:
    twice = {name: at for name, at in fixture_definitions(TESTS).items() if len(at) > 1}
    assert twice == {}


def test_a_second_definition_is_found(tmp_path: Path) -> None:
    body = "import pytest\n\n@pytest.fixture(scope='module')\ndef server():\n    return 1\n"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_x.py").write_text(body)
    assert fixture_definitions(tmp_path) == {"server": ["a/test_x.py:4", "b/test_x.py:4"]}
