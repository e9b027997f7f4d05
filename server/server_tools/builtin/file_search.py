"""file_glob_search and grep_search: find files by name, and lines by pattern, under a folder.

Both list the folder through the call's runtime (git ls-files when it is a git work tree, so
.gitignore applies; else a walk that skips junk folders such as node_modules and .git) and stop
at a time budget, answering what they found with a note. A glob with no '/' ("*.py") matches a
file's name at any depth; with a '/' it matches the path from the searched folder, anywhere below
it unless it starts with "**/" or '/' (then from the top). `*` and `?` stay within a name, `**`
crosses folders. The answers are capped: 100 paths, 100 matching lines (each cut at 1000
characters: a minified file is one enormous line).
"""

from __future__ import annotations

import functools
import re

from server.server_tools.builtin.globs import path_glob_match
from server.server_tools.registry import Emit, JsonObject, ToolCall, ToolError
from server.server_tools.runtimes.runtime_io import (
    LISTING_BUDGET_S,
    Budget,
    Entry,
    ListKind,
    Runtime,
)
from server.server_tools.tool_base import BuiltinTool, bool_param, int_param, prop, text_param

GLOB_MAX_RESULTS = 100
GREP_MAX_MATCHES = 100
GREP_BUDGET_S = 30.0  # the listing and the reading together
GREP_MAX_FILE = 32 * 1024 * 1024  # larger files are not searched
GREP_MAX_LINE = 1000
BINARY_SNIFF = 8192


def selected(rel: str, include: str, exclude: str) -> bool:
    return path_glob_match(include, rel) and not (exclude and path_glob_match(exclude, rel))


def _folder(runtime: Runtime, path: str) -> str:
    """The folder `path` names, resolved; ToolError when it is not one."""
    base = runtime.resolve(path)
    try:
        is_dir = runtime.stat(base).kind == "dir"
    except OSError:
        is_dir = False
    if not is_dir:
        raise ToolError(f"path does not exist or is not a directory: {path}")
    return base


class FileGlobSearch(BuiltinTool):
    name = "file_glob_search"
    display_name = "File search"
    description = (
        "Find files under a folder whose path matches a glob pattern. .gitignore is honoured "
        "in a git repository, and junk folders (.git, node_modules, build, dist, ...) are never "
        "searched. A pattern without '/' (\"*.cpp\") matches the file name at any depth; one "
        "with '/' matches the path from the folder, at any depth unless it starts with \"**/\" "
        "or '/'. Use type \"dir\" or \"all\" to list folders too (shown with a trailing '/'; "
        "folders are listed without .gitignore filtering)."
    )
    parameters = {
        "path": prop("string", "The folder to search"),
        "include": prop("string", 'Glob of the paths to list (e.g. "*.cpp", "src/**/*.h"; '
                        'default "**")'),
        "exclude": prop("string", "Glob of the paths to leave out"),
        "type": prop("string", 'What to list: "file" (default), "dir" or "all"'),
        "max_depth": prop("integer", "How deep to go: 1 = the folder's own entries "
                          "(default 0: no limit)"),
        "limit": prop("integer", f"At most this many results (default and most: "
                      f"{GLOB_MAX_RESULTS})"),
    }  # fmt: skip
    required = ("path",)

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        params = call.params
        path = text_param(params, "path")
        include = text_param(params, "include", "**") or "**"
        exclude = text_param(params, "exclude", "")
        kind = _list_kind(text_param(params, "type", "file"))
        max_depth = max(0, int_param(params, "max_depth", 0))
        limit = int_param(params, "limit", GLOB_MAX_RESULTS)
        if limit < 1:
            raise ToolError(f"invalid limit: {limit} (expected 1 or more)")
        runtime = self.runtime(call)
        base = _folder(runtime, path)
        budget = Budget.of(LISTING_BUDGET_S, call.should_stop)
        listing = runtime.list_entries(base, max_depth, kind, budget)
        matches = [entry for entry in listing.entries if selected(entry.rel, include, exclude)]
        shown = matches[: min(limit, GLOB_MAX_RESULTS)]
        text = "".join(f"{entry.rel}{'/' if entry.is_dir else ''}\n" for entry in shown)
        text += f"\n---\nTotal matches: {len(matches)}\n"
        if len(matches) > len(shown):
            text += (
                f"[{len(shown)} results limit reached ({len(matches)} total matches). "
                "Refine the glob pattern to narrow the search.]\n"
            )
        if listing.truncated:
            text += "[results truncated: time budget or unreadable directory]\n"
        entries = [{"path": e.rel, "type": "dir" if e.is_dir else "file"} for e in shown]
        # `base` is absolute, so a client (the web UI's folder picker) can join the entries to it
        return {"plain_text_response": text, "entries": entries, "base": base}


def _list_kind(name: str) -> ListKind:
    for kind in ListKind:
        if kind.value == name:
            return kind
    raise ToolError(f'invalid type: {name} (expected "file", "dir" or "all")')


class GrepSearch(BuiltinTool):
    name = "grep_search"
    display_name = "Grep search"
    description = (
        "Search files for lines matching a pattern (a regular expression unless literal). "
        "Answers each matching line as path:line (path:number:line with line numbers), paths "
        "relative to the searched folder. .gitignore is honoured in a git repository and junk "
        "folders (.git, node_modules, build, dist, ...) are skipped. include/exclude globs: "
        "without '/' they match the file name at any depth, with '/' the path from the folder."
    )
    parameters = {
        "path": prop("string", "The file or folder to search"),
        "pattern": prop("string", "What to look for: a regular expression unless literal"),
        "include": prop("string", 'Glob of the files to search (default "**")'),
        "exclude": prop("string", "Glob of the files to skip"),
        "return_line_numbers": prop("boolean", "Show each line's number"),
        "literal": prop("boolean", "Take the pattern as plain text (default false)"),
        "ignore_case": prop("boolean", "Ignore upper and lower case (default false)"),
        "context_lines": prop("integer", "Lines to show before and after each match "
                              "(default 0)"),
    }  # fmt: skip
    required = ("path", "pattern")

    def invoke(self, call: ToolCall, emit: Emit | None = None) -> JsonObject:
        params = call.params
        path = text_param(params, "path")
        regex = _compile(
            text_param(params, "pattern"),
            literal=bool_param(params, "literal"),
            ignore_case=bool_param(params, "ignore_case"),
        )
        include = text_param(params, "include", "**") or "**"
        exclude = text_param(params, "exclude", "")
        context = max(0, int_param(params, "context_lines", 0))
        numbers = bool_param(params, "return_line_numbers") or context > 0
        runtime = self.runtime(call)
        budget = Budget.of(GREP_BUDGET_S, call.should_stop)
        files, truncated = _files_to_search(runtime, path, include, exclude, budget)
        search = _Search(regex, context, numbers)
        for full, shown_as in files:
            if search.full:
                break
            if budget.spent():
                truncated = True
                break
            search.file(runtime, full, shown_as)
        return {"plain_text_response": search.answer(truncated)}


@functools.lru_cache(maxsize=64)
def _compile(pattern: str, *, literal: bool, ignore_case: bool) -> re.Pattern[str]:
    try:
        return re.compile(re.escape(pattern) if literal else pattern, re.I if ignore_case else 0)
    except re.error as err:
        raise ToolError(f"invalid regex: {err}") from err


def _files_to_search(
    runtime: Runtime, path: str, include: str, exclude: str, budget: Budget
) -> tuple[list[tuple[str, str]], bool]:
    """(resolved path, path as shown) of each file to search, and whether the list is short."""
    full = runtime.resolve(path)
    try:
        kind = runtime.stat(full).kind
    except OSError:
        kind = "missing"
    if kind == "file":
        return [(full, path)], False
    if kind != "dir":
        raise ToolError(f"path does not exist: {path}")
    listing = runtime.list_entries(full, 0, ListKind.FILES, budget)
    chosen: list[Entry] = [e for e in listing.entries if selected(e.rel, include, exclude)]
    folder = full.rstrip("/")  # "" for the root folder: "/etc" is then joined right
    joined = [(f"{folder}/{entry.rel}", entry.rel) for entry in chosen]
    return joined, listing.truncated


class _Search:
    """The matching lines found so far, as grep prints them."""

    def __init__(self, regex: re.Pattern[str], context: int, numbers: bool) -> None:
        self.regex = regex
        self.context = context
        self.numbers = numbers
        self.lines: list[str] = []
        self.total = 0

    @property
    def full(self) -> bool:
        return self.total >= GREP_MAX_MATCHES

    def file(self, runtime: Runtime, full: str, shown_as: str) -> None:
        try:
            data = runtime.read_bytes(full, GREP_MAX_FILE)
        except OSError:
            return  # unreadable, vanished or too large: not searched
        if b"\0" in data[:BINARY_SNIFF]:
            return  # binary
        lines = data.decode("utf-8", "replace").split("\n")
        if lines[-1] == "":
            lines.pop()
        for index, line in enumerate(lines):
            if self.full:
                return
            if self.regex.search(line):
                self._add(lines, index, shown_as)

    def _add(self, lines: list[str], index: int, shown_as: str) -> None:
        first = max(0, index - self.context)
        last = min(len(lines) - 1, index + self.context)
        for number in range(first, last + 1):
            mark = ":" if number == index else "-"
            where = f"{number + 1}{mark}" if self.numbers else ""
            line = lines[number]
            if len(line) > GREP_MAX_LINE:
                line = line[:GREP_MAX_LINE] + " [line truncated]"
            self.lines.append(f"{shown_as}{mark}{where}{line}\n")
        if self.context:
            self.lines.append("--\n")
        self.total += 1

    def answer(self, truncated: bool) -> str:
        text = "".join(self.lines) + f"\n---\nTotal matches: {self.total}\n"
        if self.full:
            text += (
                f"[{GREP_MAX_MATCHES} matches limit reached. "
                "Narrow the path/pattern/include to see more.]\n"
            )
        elif truncated:
            text += "[results truncated: time budget or unreadable directory]\n"
        return text
