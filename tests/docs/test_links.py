"""The docs point at things that exist: every relative link (and its #anchor) in the Markdown
files, and every repository path written in `code`, names a file or folder of this checkout.

A moved module or test then fails here instead of leaving a guide that sends readers nowhere.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    + [ROOT / folder / "README.md" for folder in ("presets", "resources", "packaging")]
)
# Top-level folders of the repository: a code span starting with one of them is a path.
_REPO_FOLDERS = (
    "server", "app", "tests", "bench", "tools", "deploy", "packaging", "resources",
    "presets", "compat", "docs", ".ci",
)  # fmt: skip
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img [^>]*src=\"([^\"]+)\"")
_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(rf"^(?:{'|'.join(re.escape(f) for f in _REPO_FOLDERS)})/[\w./-]*$")


def _prose(path: Path) -> str:
    """The file without its fenced code blocks (examples, not references)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    for line in _prose(path).splitlines():
        if match := re.match(r"#{1,6}\s+(.*)", line):
            slug = base = _slug(match.group(1))
            number = 0
            while slug in anchors:  # GitHub numbers repeated headings: x, x-1, x-2
                number += 1
                slug = f"{base}-{number}"
            anchors.add(slug)
    return anchors


def _broken_links(doc: Path) -> list[str]:
    broken = []
    for match in _LINK.finditer(_prose(doc)):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    return broken


def _missing_paths(doc: Path) -> list[str]:
    """Paths in `code` that name nothing here; with `::test_x`, a file that defines no test_x."""
    missing = []
    for match in _CODE.finditer(_prose(doc)):
        path, _, test = match.group(1).split(" ")[0].partition("::")
        if not _PATH.match(path):
            continue
        if not (ROOT / path).exists():
            missing.append(path)
        elif test and f"def {test.split('[')[0]}(" not in (ROOT / path).read_text("utf-8"):
            missing.append(f"{path}::{test}")
    return missing


@cache
def _defined_tests() -> set[str]:
    return {
        name
        for path in (ROOT / "tests").rglob("test_*.py")
        for name in re.findall(r"^\s*(?:async )?def (test_\w+)\(", path.read_text("utf-8"), re.M)
    }


def _missing_tests(doc: Path, defined: set[str]) -> list[str]:
    """Test names written alone in `code` (`test_x`) that no file under tests/ defines."""
    names = {match.group(1) for match in re.finditer(r"`(test_\w+)`", _prose(doc))}
    return sorted(names - defined)


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    assert not _broken_links(doc), f"{doc.relative_to(ROOT)}: {_broken_links(doc)}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_every_repository_path_named_exists(doc: Path) -> None:
    assert not _missing_paths(doc), f"{doc.relative_to(ROOT)} names {_missing_paths(doc)}"


# COMPATIBILITY.md names llama.cpp's own server tests, which are not in this repository.
_OWN_TEST_DOCS = [doc for doc in DOCS if doc.name != "COMPATIBILITY.md"]


@pytest.mark.parametrize("doc", _OWN_TEST_DOCS, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_every_test_named_exists(doc: Path) -> None:
    missing = _missing_tests(doc, _defined_tests())
    assert not missing, f"{doc.relative_to(ROOT)} names tests that do not exist: {missing}"
