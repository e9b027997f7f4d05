"""The import-linter contracts in pyproject.toml name every module they must: a core module or
package left out of "Only the engine package touches llama_cpp" could import llama_cpp
unnoticed."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_core_module_but_the_engine_package_is_kept_from_llama_cpp() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c.get("forbidden_modules") == ["llama_cpp"])
    core = ROOT / "server" / "core"
    modules = {f"server.core.{path.stem}" for path in core.glob("*.py")}
    packages = {f"server.core.{path.parent.name}" for path in core.glob("*/__init__.py")}
    expected = (modules | packages) - {"server.core.__init__", "server.core.llama"}
    missing = expected - set(contract["source_modules"])
    assert not missing, f"add {sorted(missing)} to the contract in pyproject.toml"
