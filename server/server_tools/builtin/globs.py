"""The glob patterns of file_glob_search and grep_search, matched against '/'-separated paths.

`*` is any run of characters within one name, `?` one character of a name, `[abc]`, `[a-z]`
and `[!abc]` (or `[^abc]`) one character from a set, and `**` any run of characters across
folders (`**/` also matches no folder at all, so "**/*.py" matches "setup.py").
"""

from __future__ import annotations

import functools
import posixpath
import re


def path_glob_match(pattern: str, rel: str) -> bool:
    """Whether the relative path `rel` is selected by `pattern`.

    A pattern without '/' is matched against the last name of the path, at any depth; one
    with '/' against the whole path, anchored at the top when it starts with "**/" or '/',
    else anywhere below ("src/*.c" is "**/src/*.c").
    """
    if "/" not in pattern:
        return glob_regex(pattern).fullmatch(posixpath.basename(rel)) is not None
    if pattern.startswith("/"):
        pattern = pattern[1:]
    elif pattern != "**" and not pattern.startswith("**/"):
        pattern = "**/" + pattern
    return glob_regex(pattern).fullmatch(rel) is not None


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression a glob stands for (matched with fullmatch)."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**", index):
            index += 2
            if pattern.startswith("/", index):
                out.append("(?:.*/)?")
                index += 1
            else:
                out.append(".*")
            continue
        if char == "[":
            translated, index = _char_class(pattern, index)
            out.append(translated)
            continue
        out.append({"*": "[^/]*", "?": "[^/]"}.get(char, re.escape(char)))
        index += 1
    return re.compile("".join(out), re.DOTALL)


def _char_class(pattern: str, start: int) -> tuple[str, int]:
    """The set that opens at `start`, as a regex, and where the pattern goes on after it.

    A '[' that is never closed is a plain '['; a ']' right after the opening (or after its
    '!') belongs to the set.
    """
    index = start + 1
    negate = index < len(pattern) and pattern[index] in "!^"
    if negate:
        index += 1
    body_start = index
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    close = pattern.find("]", index)
    if close < 0:
        return re.escape("["), start + 1
    body = pattern[body_start:close].replace("\\", "\\\\").replace("[", "\\[")
    body = body.replace("]", "\\]").replace("^", "\\^")
    return f"[{'^' if negate else ''}{body}]", close + 1
