"""Users taking turns on one server: time to first token of a returning conversation.

    .venv/bin/python -m bench.prompt_cache [--users 3] [--rounds 3] [--parallel 1]

Each user has a conversation of some 1,100 tokens of their own; they take turns (A1 B1 C1 A2
B2 C2 ...), each turn adding the reply and one more line to that user's history. The same
turns run against Hearth and against llama-server built from the llama.cpp Hearth runs
(bench/build_llama_server.sh; its prompt cache, `--cache-ram`, on by default), one server after
the other in one run, with the same model, threads and context per slot. Prints the median time
to the first streamed token of first turns (nothing cached) and of later turns (the user's own
history seen before), and the ratios: Hearth / llama-server on later turns, and Hearth's later
turns / its own first turns. `--restart`: Hearth alone with `--cachedir`, each user's next turn
after a restart against the first turns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from bench.servers import (
    CONTEXT,
    THREADS,
    hearth_command,
    llama_server_binary,
    start_server,
    stop_server,
)
from server.models.files import resolve_model_path

PORT = 5097
BASE = f"http://127.0.0.1:{PORT}"
NAMES = "ABCDEFGHIJKLMNOP"
SUBJECTS = [
    "a lighthouse keeper",
    "a desert caravan",
    "a clockmaker's shop",
    "a mountain railway",
    "a river ferry",
    "an orchard in winter",
    "a night market",
    "an observatory on a hill",
]


def opening(user: int) -> str:
    """About 1,100 tokens, the user's own from the first line."""
    name, subject = NAMES[user], SUBJECTS[user % len(SUBJECTS)]
    lines = [
        f"{name}'s notes on {subject}, part {number}: the morning light, the people who "
        f"came by, what they said about the weather and the work still to be done."
        for number in range(36)
    ]
    return "\n".join(lines) + "\n"


@dataclass
class Timings:
    first_turns: list[float] = field(default_factory=list)
    later_turns: list[float] = field(default_factory=list)


def first_token_seconds(prompt: str, tokens: int) -> tuple[float, str]:
    """Stream a /completion (both servers speak it); seconds to the first text, and the text."""
    body = {"prompt": prompt, "n_predict": tokens, "stream": True, "temperature": 0}
    started = time.perf_counter()
    first, text = 0.0, []
    with httpx.stream("POST", BASE + "/completion", json=body, timeout=600) as response:
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            content = json.loads(line[6:]).get("content", "")
            if content and not first:
                first = time.perf_counter() - started
            text.append(content)
    return first, "".join(text)


def converse(
    users: int, rounds: int, tokens: int, history: list[str] | None = None
) -> tuple[Timings, list[str]]:
    """`rounds` turns of every user; a `history` given continues those conversations (their
    first turn here then counts as a later one)."""
    timings = Timings()
    known = history is not None
    history = list(history) if history is not None else [opening(u) for u in range(users)]
    for round_ in range(rounds):
        for user in range(users):
            seconds, reply = first_token_seconds(history[user], tokens)
            (timings.later_turns if round_ or known else timings.first_turns).append(seconds)
            history[user] += reply + f"\n{NAMES[user]} asks about part {round_ + 36}.\n"
    return timings, history


def measure(command: Sequence[str], probe: str, args: argparse.Namespace) -> Timings:
    server = start_server(command, BASE, probe)
    try:
        first_token_seconds("Warm up.", 2)  # first-request costs are not the cache's
        timings, _ = converse(args.users, args.rounds, args.tokens)
        return timings
    finally:
        stop_server(server)


def across_a_restart(command: Sequence[str], args: argparse.Namespace) -> Timings:
    """Hearth with --cachedir: every user's first turn, a restart, then every user's next
    turn (its `later_turns`) against the first turns (nothing cached)."""
    with tempfile.TemporaryDirectory() as folder:
        command = [*command, "--cachedir", folder]
        server = start_server(command, BASE, "/api/extra/version")
        try:
            first_token_seconds("Warm up.", 2)
            before, history = converse(args.users, 1, args.tokens)
        finally:
            stop_server(server)
        server = start_server(command, BASE, "/api/extra/version")
        try:
            first_token_seconds("Warm up.", 2)
            after, _ = converse(args.users, 1, args.tokens, history)
        finally:
            stop_server(server)
    return Timings(before.first_turns, after.later_turns)


def llama_server_command(parallel: int) -> list[str]:
    return [
        *(llama_server_binary(), "-m", str(resolve_model_path(None)), "--port", str(PORT)),
        *("-t", str(THREADS), "-tb", str(THREADS), "-c", str(CONTEXT * parallel)),
        *("-np", str(parallel), "--no-webui"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=8, help="tokens generated per turn")
    parser.add_argument("--parallel", type=int, default=1, help="slots on both servers")
    parser.add_argument(
        "--restart", action="store_true", help="Hearth alone: warm after a restart (--cachedir)"
    )
    args = parser.parse_args()
    hearth = hearth_command(PORT, "--parallelrequests", str(args.parallel))
    hearth[hearth.index("--contextsize") + 1] = str(CONTEXT * args.parallel)
    if args.restart:
        timings = across_a_restart(hearth, args)
        first, later = (
            statistics.median(timings.first_turns),
            statistics.median(timings.later_turns),
        )
        print(f"{args.users} users, Hearth with --cachedir, median time to first token")
        print(f"  first turn (nothing cached)      {first:.3f}s")
        print(f"  next turn after a restart        {later:.3f}s   ({later / first:.3f} of cold)")
        return
    results = {
        "llama-server": measure(llama_server_command(args.parallel), "/health", args),
        "Hearth": measure(hearth, "/api/extra/version", args),
    }
    report(results, args)


def report(results: dict[str, Timings], args: argparse.Namespace) -> None:
    peer, hearth = results["llama-server"], results["Hearth"]
    first = {name: statistics.median(t.first_turns) for name, t in results.items()}
    later = {name: statistics.median(t.later_turns) for name, t in results.items()}
    print(
        f"{args.users} users, {args.rounds} rounds, {args.parallel} slot(s) of {CONTEXT} tokens,"
        f" {THREADS} threads; median time to first token"
    )
    print(f"  {'':34s} {'llama-server':>12s} {'Hearth':>8s} {'Hearth/llama-server':>20s}")
    for label, values in (("first turn (nothing cached)", first), ("later turns", later)):
        ratio = values["Hearth"] / values["llama-server"]
        print(
            f"  {label:34s} {values['llama-server']:11.3f}s {values['Hearth']:7.3f}s {ratio:20.2f}"
        )
    print(f"  Hearth later / first turn: {later['Hearth'] / first['Hearth']:.3f}")
    print(
        f"  ({len(peer.later_turns)} later turns each; Hearth's: "
        f"{', '.join(f'{s:.3f}' for s in hearth.later_turns)})"
    )


if __name__ == "__main__":
    main()
