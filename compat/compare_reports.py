"""Every case of llama.cpp's server suite, Hearth's result beside llama-server's, and why they
differ: the table in docs/COMPATIBILITY.md, from two `make compat` reports.

    .venv/bin/python compat/compare_reports.py compat/reports/hearth-all.json \\
        compat/reports/llama-server-all.json [--write docs/COMPATIBILITY.md] [--strict]

Each case llama-server passes and Hearth does not needs a reason in compat/reasons.toml (the
first entry whose `cases` patterns match the case id, fnmatch-style): fixed later, a feature
another issue owns, or different on purpose. One without is listed as "unexplained" and, with
`--strict`, makes the exit status 1. `--write FILE` replaces the text between FILE's
`<!-- cases:begin -->` and `<!-- cases:end -->` lines with the tables; otherwise they are
printed.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- cases:begin -->", "<!-- cases:end -->"
SHOWN = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "skip", None: "—"}


def outcomes(report: Path) -> dict[str, str]:
    data: dict[str, Any] = json.loads(report.read_text())
    return {case["id"]: case["outcome"] for case in data["cases"]}


def reasons(path: Path) -> list[tuple[list[str], str]]:
    entries = tomllib.loads(path.read_text()).get("reason", [])
    return [(list(entry["cases"]), str(entry["why"])) for entry in entries]


def reason_for(case: str, known: list[tuple[list[str], str]]) -> str | None:
    for patterns, why in known:
        if any(fnmatch.fnmatchcase(case, pattern) for pattern in patterns):
            return why
    return None


def tables(
    hearth: dict[str, str], peer: dict[str, str], known: list[tuple[list[str], str]]
) -> tuple[str, int]:
    """The markdown (per-file totals, then every case) and how many llama-server passes that
    Hearth does not without a reason."""
    cases = sorted(set(hearth) | set(peer))
    files = sorted({case.split("::")[0] for case in cases})
    lines = [
        "| file | cases | llama-server passes | Hearth passes | both pass | llama-server only |",
        "|---|---|---|---|---|---|",
    ]
    for name in files:
        mine = [case for case in cases if case.startswith(name + "::")]
        theirs_pass = {c for c in mine if peer.get(c) == "passed"}
        ours_pass = {c for c in mine if hearth.get(c) == "passed"}
        lines.append(
            f"| `{name}` | {len(mine)} | {len(theirs_pass)} | {len(ours_pass)} | "
            f"{len(theirs_pass & ours_pass)} | {len(theirs_pass - ours_pass)} |"
        )
    totals = Counter(hearth.get(c) == "passed" for c in cases if peer.get(c) == "passed")
    lines += [
        "",
        f"Of the {sum(totals.values())} cases llama-server passes, Hearth passes "
        f"{totals[True]}; each of the other {totals[False]} has its reason below.",
        "",
        "| case | llama-server | Hearth | why they differ |",
        "|---|---|---|---|",
    ]
    unexplained = 0
    for case in cases:
        ours, theirs = hearth.get(case), peer.get(case)
        why = ""
        if theirs == "passed" and ours != "passed":
            why = reason_for(case, known) or ""
            if not why:
                why, unexplained = "**unexplained**", unexplained + 1
        elif ours == "passed" and theirs != "passed":
            why = reason_for(case, known) or "Hearth only"
        lines.append(f"| `{case}` | {SHOWN[theirs]} | {SHOWN[ours]} | {why} |")
    return "\n".join(lines) + "\n", unexplained


def write_between_markers(path: Path, text: str) -> None:
    document = path.read_text()
    head, found, rest = document.partition(BEGIN + "\n")
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise SystemExit(f"{path} has no {BEGIN} ... {END} lines")
    path.write_text(head + BEGIN + "\n" + text + END + tail)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hearth", type=Path, help="Hearth's report (make compat --report)")
    parser.add_argument("llama_server", type=Path, help="llama-server's report")
    parser.add_argument("--reasons", type=Path, default=HERE / "reasons.toml")
    parser.add_argument("--write", type=Path, help="a document with the marker lines")
    parser.add_argument("--strict", action="store_true", help="exit 1 on an unexplained case")
    args = parser.parse_args()
    text, unexplained = tables(
        outcomes(args.hearth), outcomes(args.llama_server), reasons(args.reasons)
    )
    if args.write:
        write_between_markers(args.write, text)
    else:
        sys.stdout.write(text)
    if unexplained:
        sys.stderr.write(f"{unexplained} cases llama-server passes have no reason\n")
    return 1 if args.strict and unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
