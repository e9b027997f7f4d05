"""`make lint`'s size check: no function over 60 lines, no module over 400, in hearth/, server/
and app/.

A function's length is counted from its `def` line to its last line, docstring included; a
module's is its number of lines. Declarative tables (a module-level assignment of a literal,
such as a list of setting bindings) do not count against a function, and a module may be
listed in ALLOWED_LONG_MODULES only with the reason beside it.

    python tools/check_sizes.py [--max-function 60] [--max-module 400] [PATH ...]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

DEFAULT_PATHS = ("hearth", "server", "app")
# module path → why it may be longer (keep this empty unless a table really is the module).
ALLOWED_LONG_MODULES: dict[str, str] = {}


def python_files(paths: list[str]) -> Iterator[Path]:
    for name in paths:
        path = Path(name)
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def long_functions(tree: ast.AST, limit: int) -> Iterator[tuple[int, str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - start + 1
            if length > limit:
                yield node.lineno, node.name, length


def problems(paths: list[str], max_function: int, max_module: int) -> list[str]:
    found = []
    for path in python_files(paths):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > max_module and path.as_posix() not in ALLOWED_LONG_MODULES:
            found.append(f"{path}: {lines} lines (a module may have {max_module})")
        for line, name, length in long_functions(ast.parse(text, str(path)), max_function):
            found.append(f"{path}:{line}: {name}() is {length} lines (at most {max_function})")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS))
    parser.add_argument("--max-function", type=int, default=60)
    parser.add_argument("--max-module", type=int, default=400)
    args = parser.parse_args(argv)
    found = problems(args.paths, args.max_function, args.max_module)
    for problem in found:
        print(problem)
    if found:
        print(f"{len(found)} size problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
