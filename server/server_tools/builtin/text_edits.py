"""edit_file's replacements: exact text, unique, not overlapping, all against the original.

Models often copy a line with its trailing spaces lost or its quotes "smartened", so an
`old_text` that is not found as it is is looked for again with both sides normalised line by
line (trailing blanks dropped; typographic quotes, dashes and spaces made ASCII). Only the lines
such a replacement touches come out normalised; every other line is written back byte for byte.
Uniqueness is always judged on the normalised text: two lines that differ only in trailing
spaces are the same line to a model.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from server.server_tools.registry import ToolError

_PLAIN = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u00a0\u202f\u205f\u3000", " "),
        **dict.fromkeys([chr(code) for code in range(0x2002, 0x200B)], " "),
    }
)


@dataclass(frozen=True)
class Edit:
    old_text: str
    new_text: str


@dataclass(frozen=True)
class _Match:
    edit_index: int
    start: int  # in the text the replacements apply to (the original, or its normalised form)
    length: int
    new_text: str

    @property
    def end(self) -> int:
        return self.start + self.length


def normalise(text: str) -> str:
    """The text with each line normalised; the number of lines is unchanged."""
    return "\n".join(line.translate(_PLAIN).rstrip(" \t\r") for line in text.split("\n"))


def apply_edits(content: str, edits: list[Edit], path: str) -> str:
    """The content with every edit applied; ToolError when one cannot be applied as asked."""
    fuzzy = _needs_normalising(content, edits, path)
    base = normalise(content) if fuzzy else content
    matches = _find_matches(content, base, edits, fuzzy, path)
    for before, after in itertools.pairwise(matches):
        if before.end > after.start:
            raise ToolError(
                f"edits[{before.edit_index}] and edits[{after.edit_index}] overlap in {path}; "
                "merge them into one edit or target disjoint regions"
            )
    edited = _replace_keeping_lines(content, base, matches) if fuzzy else _replace(base, matches)
    if edited == content:
        raise ToolError("no changes made: the replacement(s) produced identical content")
    return edited


def _needs_normalising(content: str, edits: list[Edit], path: str) -> bool:
    fuzzy = False
    normalised = None
    for index, edit in enumerate(edits):
        if edit.old_text in content:
            continue
        normalised = normalised if normalised is not None else normalise(content)
        needle = normalise(edit.old_text)
        if not needle or needle not in normalised:
            raise ToolError(
                f"could not find edits[{index}].old_text in {path}, "
                "it must match the file's current content exactly"
            )
        fuzzy = True
    return fuzzy


def _find_matches(
    content: str, base: str, edits: list[Edit], fuzzy: bool, path: str
) -> list[_Match]:
    normalised = normalise(content)
    matches = []
    for index, edit in enumerate(edits):
        loose = normalise(edit.old_text)
        occurrences = normalised.count(loose) if loose else content.count(edit.old_text)
        if occurrences > 1:
            raise ToolError(
                f"found {occurrences} occurrences of edits[{index}].old_text in {path}, "
                "it must be unique"
            )
        needle = loose if fuzzy else edit.old_text
        start = base.find(needle) if needle else -1
        if start < 0:  # only a blank old_text, in a file that needed normalising, gets here
            raise ToolError(
                f"could not find edits[{index}].old_text in {path}, "
                "it must match the file's current content exactly"
            )
        matches.append(_Match(index, start, len(needle), edit.new_text))
    return sorted(matches, key=lambda match: match.start)


def _replace(text: str, matches: list[_Match], offset: int = 0) -> str:
    """Apply sorted, disjoint matches whose offsets are `offset` more than `text`'s."""
    pieces = []
    cursor = 0
    for match in matches:
        pieces += [text[cursor : match.start - offset], match.new_text]
        cursor = match.end - offset
    pieces.append(text[cursor:])
    return "".join(pieces)


def _lines(text: str) -> list[str]:
    """The lines of `text`, each with its "\\n" (the last may have none)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _replace_keeping_lines(original: str, base: str, matches: list[_Match]) -> str:
    """Apply matches found in `base` (the normalised text) to the lines they touch; the
    other lines come from `original` as they were."""
    spans = []
    offset = 0
    for line in _lines(base):
        spans.append((offset, offset + len(line)))
        offset += len(line)
    groups: list[tuple[int, int, list[_Match]]] = []  # first line, line after, matches
    for match in matches:
        first = next(i for i, (start, end) in enumerate(spans) if start <= match.start < end)
        last = next(i for i in range(first, len(spans)) if spans[i][1] >= match.end)
        if groups and first < groups[-1][1]:
            groups[-1] = (groups[-1][0], max(groups[-1][1], last + 1), [*groups[-1][2], match])
        else:
            groups.append((first, last + 1, [match]))
    original_lines = _lines(original)
    pieces = []
    next_line = 0
    for first, after, group in groups:
        pieces += original_lines[next_line:first]
        start, end = spans[first][0], spans[after - 1][1]
        pieces.append(_replace(base[start:end], group, start))
        next_line = after
    pieces += original_lines[next_line:]
    return "".join(pieces)
