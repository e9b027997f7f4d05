"""read_file, write_file and edit_file: a model reads a text file, writes one, or changes parts
of one by exact replacement (text_edits).

Paths are resolved by the call's runtime (relative ones against the `x-tool-cwd` folder) and
answered back as the model gave them. read_file answers at most 16 KB of text: a longer file
must be read by line range. With `x-resp-type: base64` (set by the client, never the model) it
answers the raw bytes instead, for a client that shows an image or downloads the file.
"""

from __future__ import annotations

import base64

from server.server_tools.builtin.text_edits import Edit, apply_edits
from server.server_tools.registry import Emit, JsonObject, ToolCall, ToolError
from server.server_tools.runtimes.runtime_io import PathInfo, Runtime
from server.server_tools.tool_base import (
    BuiltinTool,
    bool_param,
    int_param,
    prop,
    reason,
    text_param,
)

READ_MAX_TEXT = 16 * 1024  # what read_file answers as text, at most
READ_MAX_RANGE_FILE = 64 * 1024 * 1024  # a file read by line range is still read whole
READ_MAX_BASE64 = 32 * 1024 * 1024
EDIT_MAX_FILE = 64 * 1024 * 1024
BINARY_SNIFF = 8192  # a NUL byte in the first this many bytes: not a text file


class ReadFile(BuiltinTool):
    name = "read_file"
    display_name = "Read file"
    description = (
        "Read a text file. Give start_line/end_line (1-based, inclusive) to read part of it; "
        "a file over 16 KB must be read that way. With append_loc, each line starts with its "
        'number and an arrow ("12\u2192...").'
    )
    parameters = {
        "path": prop("string", "The file to read"),
        "start_line": prop("integer", "First line to read, 1-based (default 1)"),
        "end_line": prop("integer", "Last line to read, inclusive (default: the last line)"),
        "append_loc": prop("boolean", "Start each line with its line number"),
    }
    required = ("path",)

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        path = text_param(call.params, "path")
        start_line = int_param(call.params, "start_line", 1)
        end_line = int_param(call.params, "end_line", 0)
        append_loc = bool_param(call.params, "append_loc")
        runtime = self.runtime(call)
        full = runtime.resolve(path)
        info = _file_info(runtime, full, path)
        if call.resp_type == "base64":
            return _read_base64(runtime, full, path, info)
        if end_line <= 0 and info.size > READ_MAX_TEXT:
            raise ToolError(
                f"file too large ({info.size} bytes, max {READ_MAX_TEXT}). "
                "Use start_line/end_line to read a portion."
            )
        if info.size > READ_MAX_RANGE_FILE:
            raise ToolError(f"file too large ({info.size} bytes, max {READ_MAX_RANGE_FILE})")
        data = _read(runtime, full, path, READ_MAX_RANGE_FILE)
        if b"\0" in data[:BINARY_SNIFF]:
            raise ToolError(f"not a text file: {path} (it holds binary data)")
        text = data.decode("utf-8", "replace")
        return {"plain_text_response": line_range(text, start_line, end_line, append_loc)}


def line_range(text: str, start_line: int, end_line: int, append_loc: bool) -> str:
    """Lines start_line..end_line (end_line <= 0: to the end), each ending in a newline."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the file does not start another line
    last = len(lines) if end_line <= 0 else min(end_line, len(lines))
    out: list[str] = []
    size = 0
    for number in range(max(1, start_line), last + 1):
        line = lines[number - 1]
        piece = f"{number}\u2192{line}\n" if append_loc else f"{line}\n"
        size += len(piece.encode("utf-8"))
        if size > READ_MAX_TEXT:
            out.append("[output truncated]")
            break
        out.append(piece)
    return "".join(out)


def _file_info(runtime: Runtime, full: str, path: str) -> PathInfo:
    try:
        info = runtime.stat(full)
    except OSError as err:
        raise ToolError(f"cannot stat file: {path} ({reason(err)})") from err
    if info.kind == "missing":
        raise ToolError(f"cannot stat file: {path} (no such file)")
    if info.kind == "dir":
        raise ToolError(f"cannot read {path}: it is a directory")
    if info.kind != "file":
        raise ToolError(f"cannot read {path}: not a regular file")
    return info


def _read(runtime: Runtime, full: str, path: str, limit: int) -> bytes:
    try:
        return runtime.read_bytes(full, limit)
    except OSError as err:
        raise ToolError(f"failed to open file: {path} ({reason(err)})") from err


def _read_base64(runtime: Runtime, full: str, path: str, info: PathInfo) -> JsonObject:
    if info.size > READ_MAX_BASE64:
        raise ToolError(f"file too large ({info.size} bytes, max {READ_MAX_BASE64})")
    data = _read(runtime, full, path, READ_MAX_BASE64)
    return {"base64": base64.b64encode(data).decode("ascii"), "size_bytes": len(data)}


class WriteFile(BuiltinTool):
    name = "write_file"
    display_name = "Write file"
    permission_write = True
    description = (
        "Write a file whole, creating it and its parent folders if needed, or replacing what "
        "it held. To change part of a file, use edit_file."
    )
    parameters = {
        "path": prop("string", "The file to write"),
        "content": prop("string", "The file's new content"),
    }
    required = ("path", "content")

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        path = text_param(call.params, "path")
        content = text_param(call.params, "content").encode("utf-8")
        runtime = self.runtime(call)
        try:
            runtime.write_bytes(runtime.resolve(path), content)
        except OSError as err:
            raise ToolError(f"failed to write file: {path} ({reason(err)})") from err
        return {"result": "file written successfully", "path": path, "bytes": len(content)}


class EditFile(BuiltinTool):
    name = "edit_file"
    display_name = "Edit file"
    permission_write = True
    description = (
        "Change a file by exact text replacement. Each edits[].old_text must occur exactly once "
        "in the file and is looked for in the file as it was before this call (the edits do "
        "not see each other's results), so edits must not overlap: merge nearby changes into "
        "one edit. To replace the whole file, use write_file."
    )
    parameters = {
        "path": prop("string", "The file to edit"),
        "edits": {
            "type": "array",
            "description": "The replacements, one or more",
            "items": {
                "type": "object",
                "properties": {
                    "old_text": prop("string", "The exact text to replace (unique in the file)"),
                    "new_text": prop("string", "The text to put in its place"),
                },
                "required": ["old_text", "new_text"],
            },
        },
    }
    required = ("path", "edits")

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        path = text_param(call.params, "path")
        edits = _edits(call.params.get("edits"))
        runtime = self.runtime(call)
        full = runtime.resolve(path)
        # surrogateescape: bytes that are not UTF-8 are written back as they were
        original = _read(runtime, full, path, EDIT_MAX_FILE).decode("utf-8", "surrogateescape")
        edited = apply_edits(original, edits, path)
        try:
            runtime.write_bytes(full, edited.encode("utf-8", "surrogateescape"))
        except OSError as err:
            raise ToolError(f"failed to write file: {path} ({reason(err)})") from err
        return {"result": "file edited successfully", "path": path, "edits_applied": len(edits)}


def _edits(raw: object) -> list[Edit]:
    if not isinstance(raw, list) or not raw:
        raise ToolError('"edits" must be a non-empty array')
    edits = []
    for index, item in enumerate(raw):
        old = item.get("old_text") if isinstance(item, dict) else None
        new = item.get("new_text") if isinstance(item, dict) else None
        if not isinstance(old, str) or not isinstance(new, str):
            raise ToolError(f"edits[{index}] must have the strings old_text and new_text")
        if not old:
            raise ToolError(f"edits[{index}].old_text must not be empty")
        edits.append(Edit(old, new))
    return edits
