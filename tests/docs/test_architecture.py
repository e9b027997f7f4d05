"""docs/ARCHITECTURE.md cannot drift from the tree: every package of `hearth/`, `server/`, `app/` is
named in it, and its layer table lists the server's layers in the order import-linter's
contract puts them (the paths it names must exist: tests/docs/test_links.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")


def _packages() -> list[Path]:
    found = [
        *ROOT.joinpath("hearth").rglob("__init__.py"),
        *ROOT.joinpath("server").rglob("__init__.py"),
        *ROOT.joinpath("app").rglob("__init__.py"),
    ]
    return sorted(path.parent.relative_to(ROOT) for path in found)


def _named(package: Path) -> bool:
    spellings = {f"`{package.as_posix()}/`", f"`{package.name}/`", f"`{package.name}`"}
    return any(spelling in PAGE for spelling in spellings)


def test_every_package_is_named() -> None:
    missing = [package.as_posix() for package in _packages() if not _named(package)]
    assert not missing, f"docs/ARCHITECTURE.md names no {missing}"


def _contract_layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["name"].startswith("The server's layers"))["layers"]
    return [{name.strip() for name in re.split(r"[|:]", layer)} for layer in layers]


def test_the_layer_table_follows_the_contract() -> None:
    rows = re.findall(r"^\| `(server/\w+)/` \|", PAGE, re.MULTILINE)
    layer_of = {name: index for index, layer in enumerate(_contract_layers()) for name in layer}
    unknown = [row for row in rows if row.replace("/", ".") not in layer_of]
    assert not unknown, f"the table lists {unknown}, which the contract does not"
    ranks = [layer_of[row.replace("/", ".")] for row in rows]
    assert len(rows) == len(layer_of), f"the table lists {rows}, the contract {sorted(layer_of)}"
    assert ranks == sorted(ranks), f"the table's order {rows} is not the contract's"
