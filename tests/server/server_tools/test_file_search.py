"""file_glob_search and grep_search on this machine: llama.cpp's cases (folders, depth, limit,
junk folders, the type check), .gitignore in a git work tree, grep's options and caps, and the
glob rules both share."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from server.server_tools.builtin.file_search import GREP_MAX_MATCHES, FileGlobSearch, GrepSearch
from server.server_tools.builtin.globs import path_glob_match
from server.server_tools.registry import JsonObject, ToolCall, ToolError


def glob(params: JsonObject, cwd: Path | None = None) -> JsonObject:
    return FileGlobSearch().invoke(ToolCall(params, cwd=cwd))


def grep(params: JsonObject, cwd: Path | None = None) -> str:
    answer = GrepSearch().invoke(ToolCall(params, cwd=cwd))
    text: str = answer["plain_text_response"]
    return text


def paths(answer: JsonObject) -> list[str]:
    return [entry["path"] for entry in answer["entries"]]


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    (tmp_path / "project-alpha" / "src").mkdir(parents=True)
    (tmp_path / "project-alpha" / "README.md").write_text("alpha")
    (tmp_path / "project-alpha" / "src" / "main.cpp").write_text("int main() {}")
    (tmp_path / "project-beta").mkdir()
    (tmp_path / "project-beta" / "notes.txt").write_text("beta")
    return tmp_path


def test_type_dir_lists_folders_with_a_slash_in_the_text(projects: Path) -> None:
    answer = glob({"path": str(projects), "type": "dir"})
    text = answer["plain_text_response"]
    for folder in ("project-alpha/", "project-beta/", "project-alpha/src/"):
        assert f"{folder}\n" in text
    assert "README.md" not in text
    types = {entry["path"]: entry["type"] for entry in answer["entries"]}
    assert types == {"project-alpha": "dir", "project-beta": "dir", "project-alpha/src": "dir"}
    assert answer["base"] == str(projects)

    everything = glob({"path": str(projects), "type": "all", "include": "*proj*"})
    assert sorted(paths(everything)) == ["project-alpha", "project-beta"]


def test_max_depth_and_limit(tmp_path: Path) -> None:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "top.txt").write_text("top")
    (tmp_path / "a" / "mid.txt").write_text("mid")
    (tmp_path / "a" / "b" / "deep.txt").write_text("deep")

    assert paths(glob({"path": str(tmp_path), "max_depth": 1})) == ["top.txt"]
    assert sorted(paths(glob({"path": str(tmp_path), "max_depth": 2}))) == ["a/mid.txt", "top.txt"]
    limited = glob({"path": str(tmp_path), "limit": 1})
    assert len(limited["entries"]) == 1
    assert "Total matches: 3" in limited["plain_text_response"]
    assert "1 results limit reached (3 total matches)" in limited["plain_text_response"]
    with pytest.raises(ToolError, match="invalid limit: 0"):
        glob({"path": str(tmp_path), "limit": 0})


def test_junk_folders_are_listed_but_never_walked(tmp_path: Path) -> None:
    (tmp_path / "build" / "nested").mkdir(parents=True)
    (tmp_path / "build" / "artifact.txt").write_text("built")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.cpp").write_text("int main() {}")

    top = glob({"path": str(tmp_path), "type": "dir", "max_depth": 1})
    assert "build" in paths(top)
    everything = paths(glob({"path": str(tmp_path), "type": "all"}))
    assert "src/main.cpp" in everything
    assert "build/artifact.txt" not in everything
    assert "build/nested" not in everything


def test_links_are_listed_but_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("x")
    (tmp_path / "real" / "loop").symlink_to(tmp_path)
    found = paths(glob({"path": str(tmp_path), "type": "all"}))
    assert sorted(found) == ["real", "real/f.txt", "real/loop"]


def test_bad_type_and_bad_folder_are_answered_in_band(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="invalid type: bogus"):
        glob({"path": str(tmp_path), "type": "bogus"})
    with pytest.raises(ToolError, match="path does not exist or is not a directory: nowhere"):
        glob({"path": "nowhere"}, tmp_path)


def test_relative_path_resolves_against_the_cwd(tmp_path: Path) -> None:
    (tmp_path / "rel.txt").write_text("x")
    (tmp_path / "other.md").write_text("x")
    answer = glob({"path": ".", "include": "*.txt"}, tmp_path)
    assert paths(answer) == ["rel.txt"]
    assert answer["base"] == str(tmp_path)


def test_a_stop_ends_the_walk_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x")
    answer = FileGlobSearch().invoke(ToolCall({"path": str(tmp_path)}, should_stop=lambda: True))
    assert "[results truncated" in answer["plain_text_response"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_work_tree_is_listed_by_git_so_gitignore_applies(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "kept.py").write_text("print()")
    (tmp_path / "noise.log").write_text("noise")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1")
    found = paths(glob({"path": str(tmp_path)}))
    assert sorted(found) == [".gitignore", "kept.py", "pkg/mod.py"]
    assert grep({"path": str(tmp_path), "pattern": "noise"}).endswith("Total matches: 0\n")


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "one.py").write_text("import os\nMARKER = 1\nprint(MARKER)\n")
    (tmp_path / "two.txt").write_text("a\nb\nmarker here\nc\nd\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "dep.py").write_text("MARKER = 2\n")
    (tmp_path / "blob.bin").write_bytes(b"MARKER\x00\x01")
    return tmp_path


def test_grep_finds_lines_with_relative_paths(sources: Path) -> None:
    text = grep({"path": str(sources), "pattern": "MARKER"})
    assert text == "pkg/one.py:MARKER = 1\npkg/one.py:print(MARKER)\n\n---\nTotal matches: 2\n"
    numbered = grep({"path": ".", "pattern": "MARKER =", "return_line_numbers": True}, sources)
    assert numbered.startswith("pkg/one.py:2:MARKER = 1\n")
    assert "Total matches: 1" in numbered


def test_grep_include_a_name_at_any_depth(sources: Path) -> None:
    text = grep({"path": str(sources), "pattern": "marker", "ignore_case": True,
                 "include": "one.py"})  # fmt: skip
    assert "pkg/one.py:MARKER = 1" in text
    assert "two.txt" not in text
    assert "Total matches: 2" in text
    excluded = grep({"path": str(sources), "pattern": "marker", "exclude": "pkg/*"})
    assert excluded.startswith("two.txt:marker here\n")


def test_grep_context_lines(sources: Path) -> None:
    text = grep({"path": str(sources / "two.txt"), "pattern": "marker", "context_lines": 1})
    shown = str(sources / "two.txt")
    assert text.startswith(f"{shown}-2-b\n{shown}:3:marker here\n{shown}-4-c\n--\n")


def test_grep_literal_and_bad_patterns(sources: Path) -> None:
    assert "Total matches: 1" in grep({"path": str(sources), "pattern": "print(", "literal": True})
    with pytest.raises(ToolError, match="invalid regex"):
        grep({"path": str(sources), "pattern": "print("})
    with pytest.raises(ToolError, match="path does not exist: nowhere"):
        grep({"path": "nowhere", "pattern": "x"}, sources)


def test_grep_stops_at_its_match_limit(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("hit\n" * (GREP_MAX_MATCHES + 50))
    text = grep({"path": str(tmp_path), "pattern": "hit"})
    assert text.count("many.txt:hit\n") == GREP_MAX_MATCHES
    assert f"Total matches: {GREP_MAX_MATCHES}" in text
    assert "matches limit reached" in text


@pytest.mark.parametrize(
    ("pattern", "rel", "expected"),
    [
        ("*.py", "a/b/c.py", True),  # no '/': the name, at any depth
        ("*.py", "a/b/c.pyc", False),
        ("**", "a/b/c", True),
        ("src/*.c", "lib/src/x.c", True),  # with '/': anywhere below
        ("src/*.c", "src/sub/x.c", False),  # '*' stays within a name
        ("src/**/*.c", "src/x.c", True),  # '**/' may match no folder
        ("src/**/*.c", "src/a/b/x.c", True),
        ("/src/*.c", "lib/src/x.c", False),  # a leading '/' anchors at the top
        ("/src/*.c", "src/x.c", True),
        ("**/test.py", "mytest.py", False),
        ("file?.[ch]", "d/file1.h", True),
        ("[!a]*", "abc", False),
        ("[abc", "[abc", True),  # an unclosed '[' is a plain character
    ],
)
def test_glob_rules(pattern: str, rel: str, expected: bool) -> None:
    assert path_glob_match(pattern, rel) is expected
