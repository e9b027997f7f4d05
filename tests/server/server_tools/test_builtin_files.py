"""read_file, write_file and edit_file on this machine: the answers of llama.cpp's
tests/unit/test_tools_builtin.py, and the failures a model must be told about in-band."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from server.server_tools.builtin.builtin_files import READ_MAX_TEXT, EditFile, ReadFile, WriteFile
from server.server_tools.builtin.text_edits import Edit, apply_edits
from server.server_tools.registry import JsonObject, ToolCall, ToolError


def read(params: JsonObject, cwd: Path | None = None, resp_type: str | None = None) -> JsonObject:
    return ReadFile().invoke(ToolCall(params, cwd=cwd, resp_type=resp_type))


def write(params: JsonObject, cwd: Path | None = None) -> JsonObject:
    return WriteFile().invoke(ToolCall(params, cwd=cwd))


def edit(path: Path, *pairs: tuple[str, str]) -> JsonObject:
    edits = [{"old_text": old, "new_text": new} for old, new in pairs]
    return EditFile().invoke(ToolCall({"path": str(path), "edits": edits}))


def test_write_then_read_then_edit_as_upstream(tmp_path: Path) -> None:
    log = tmp_path / "test.log"
    written = write({"path": str(log), "content": "line1\nline2\nline3\n"})
    assert written == {"result": "file written successfully", "path": str(log), "bytes": 18}
    assert read({"path": str(log)})["plain_text_response"] == "line1\nline2\nline3\n"

    edited = edit(log, ("line2", "line2-edited"), ("line3\n", "line3\nline4\n"))
    assert edited["result"] == "file edited successfully"
    assert edited["edits_applied"] == 2
    assert read({"path": str(log)})["plain_text_response"] == "line1\nline2-edited\nline3\nline4\n"


def test_read_line_range_with_locations(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\nc\nd")  # no newline at the end: one is added
    whole = read({"path": "f.txt"}, cwd=tmp_path)
    assert whole["plain_text_response"] == "a\nb\nc\nd\n"
    part = read({"path": "f.txt", "start_line": 2, "end_line": 3, "append_loc": True}, tmp_path)
    assert part["plain_text_response"] == "2\u2192b\n3\u2192c\n"


def test_a_large_file_needs_a_line_range_and_the_answer_is_capped(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {n:06d}\n" for n in range(5000)))
    with pytest.raises(ToolError, match=r"file too large .* Use start_line/end_line"):
        read({"path": str(big)})
    part = read({"path": str(big), "start_line": 10, "end_line": 12})["plain_text_response"]
    assert part == "line 000009\nline 000010\nline 000011\n"
    capped = read({"path": str(big), "start_line": 1, "end_line": 5000})["plain_text_response"]
    assert capped.endswith("[output truncated]")
    assert len(capped.encode()) <= READ_MAX_TEXT + len("[output truncated]")


def test_read_failures_are_answered_in_band(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"cannot stat file: nope\.txt"):
        read({"path": "nope.txt"}, tmp_path)
    with pytest.raises(ToolError, match="is a directory"):
        read({"path": str(tmp_path)})
    (tmp_path / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    with pytest.raises(ToolError, match="not a text file"):
        read({"path": "blob.bin"}, tmp_path)
    with pytest.raises(ToolError, match="missing required parameter: path"):
        read({})


def test_read_as_base64_gives_the_raw_bytes(tmp_path: Path) -> None:
    blob = bytes(range(256))
    (tmp_path / "blob.bin").write_bytes(blob)
    answer = read({"path": "blob.bin"}, tmp_path, resp_type="base64")
    assert base64.b64decode(answer["base64"]) == blob
    assert answer["size_bytes"] == 256


def test_relative_paths_resolve_against_the_cwd_and_absolute_ones_do_not(tmp_path: Path) -> None:
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    (workdir / "rel.txt").write_text("relative-content")
    other = tmp_path / "other" / "abs.txt"
    other.parent.mkdir()
    other.write_text("absolute-content")

    assert "relative-content" in read({"path": "rel.txt"}, workdir)["plain_text_response"]
    assert "absolute-content" in read({"path": str(other)}, workdir)["plain_text_response"]
    assert (
        "relative-content" in read({"path": "../workdir/./rel.txt"}, workdir)["plain_text_response"]
    )
    write({"path": "sub/out.txt", "content": "written"}, workdir)
    assert (workdir / "sub" / "out.txt").read_text() == "written"


def test_write_into_a_directory_fails_in_band(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="failed to write file"):
        write({"path": str(tmp_path), "content": "x"})


def test_edit_rejects_text_that_is_not_unique(tmp_path: Path) -> None:
    log = tmp_path / "test.log"
    log.write_text("dup\ndup\n")
    with pytest.raises(ToolError, match=r"found 2 occurrences of edits\[0\]\.old_text .* unique"):
        edit(log, ("dup", "changed"))
    assert log.read_text() == "dup\ndup\n"


def test_edit_rejects_overlapping_edits(tmp_path: Path) -> None:
    log = tmp_path / "test.log"
    log.write_text("line1\nline2\n")
    with pytest.raises(ToolError, match="edits\\[0\\] and edits\\[1\\] overlap"):
        edit(log, ("line1\nline2", "a"), ("line2", "b"))
    assert log.read_text() == "line1\nline2\n"


def test_edit_failures(tmp_path: Path) -> None:
    log = tmp_path / "test.log"
    log.write_text("alpha\n")
    with pytest.raises(ToolError, match=r"could not find edits\[0\]\.old_text"):
        edit(log, ("beta", "gamma"))
    with pytest.raises(ToolError, match="no changes made"):
        edit(log, ("alpha", "alpha"))
    with pytest.raises(ToolError, match="old_text must not be empty"):
        edit(log, ("", "x"))
    with pytest.raises(ToolError, match="failed to open file"):
        edit(tmp_path / "missing.txt", ("a", "b"))
    with pytest.raises(ToolError, match='"edits" must be a non-empty array'):
        EditFile().invoke(ToolCall({"path": str(log), "edits": []}))


def test_edits_all_match_the_original_not_each_other(tmp_path: Path) -> None:
    log = tmp_path / "f.txt"
    log.write_text("a = 1\nb = 2\n")
    edit(log, ("a = 1", "a = b = 2"), ("b = 2", "b = 3"))
    assert log.read_text() == "a = b = 2\nb = 3\n"


def test_a_loose_match_changes_only_the_lines_it_touches() -> None:
    # the model lost the trailing blanks and straightened the quotes of the second line
    content = "keep  \nsay \u201chi\u201d   \nkeep\u00a0too \n"
    edited = apply_edits(content, [Edit('say "hi"', 'say "bye"')], "f.txt")
    assert edited == 'keep  \nsay "bye"\nkeep\u00a0too \n'


def test_uniqueness_is_judged_on_the_normalised_text() -> None:
    with pytest.raises(ToolError, match="found 2 occurrences"):
        apply_edits("x = 1   \nx = 1\n", [Edit("x = 1\n", "y\n")], "f.txt")


def test_edit_keeps_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"caf\xe9\nold\n")
    edit(path, ("old", "new"))
    assert path.read_bytes() == b"caf\xe9\nnew\n"
