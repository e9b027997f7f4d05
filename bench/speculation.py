"""Speculative decoding from n-grams: Hearth and llama-server, each plain and with
`--spec-type ngram-simple` (and `ngram-mod` with `--mod`), on copy-heavy work and on text that
does not repeat, in one run.

    .venv/bin/python -m bench.speculation [--repeats 3] [--tokens 300] [--mod] [--draft]
    .venv/bin/python -m bench.speculation --kinds draft

With --draft, a draft model too: the bundled model drafting for itself on both servers (no
smaller model shares its vocabulary here), so the draft costs as much as the model and the
figure that matters is Hearth against llama-server with the same draft model, not the gain.

Copy-heavy: the model is asked to write out a 48-line Python file again (greedy); the
bundled model copies it exactly. Loose copy: the same with a 48-line file of ordinary Python,
which the small model rewrites with changes of its own (text that repeats in part; the two
servers may part on a near-tie, so their texts can differ). Not repeating: a story, sampled
with a repetition penalty and a fixed seed, where drafts rarely match; there speculation must
cost nothing. Both servers from the same llama.cpp (bench/build_llama_server.sh), the bundled
model, the same threads and context, one server at a time, repetitions interleaved; each
prompt starts with a fresh line so nothing is reused from a cache. Decode speed is measured
as a client sees it: tokens after the first over the seconds from the first streamed text to
the end (/completion, which both serve). Prints tokens/s (medians), the drafts accepted, and
the ratios the issue asks about.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.servers import (
    CONTEXT,
    THREADS,
    hearth_command,
    llama_server_binary,
    start_server,
    stop_server,
)
from server.models.files import bundled_model_path

PORT = 5098
DRAFT_MAX = 8  # KoboldCpp's draftamount default
DRAFT_P_MIN = 0.75  # Hearth's default; llama-server's is 0
BASE = f"http://127.0.0.1:{PORT}"

# Copy-heavy: a 48-line Python file to write out again, which the bundled model copies exactly.
WORDS = "apple river stone cloud lantern harbor meadow copper willow ember falcon garnet"
ACCESSORS = "\n".join(
    f"def read_{word}(items):\n    return [item.{word} for item in items if item.{word}]\n"
    for word in f"{WORDS} basket candle pepper saddle".split()
)
# A 48-line file of ordinary Python, which the bundled model (270M parameters) rewrites with
# changes of its own after a few lines: text that repeats in part.
INVENTORY = """import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 0
    tags: list[str] = field(default_factory=list)

    def total(self) -> float:
        return self.price * self.quantity


class Inventory:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: dict[str, Item] = {}

    def load(self) -> None:
        data = json.loads(self.path.read_text())
        for entry in data["items"]:
            item = Item(entry["name"], entry["price"], entry["quantity"])
            item.tags = list(entry.get("tags", []))
            self.items[item.name] = item

    def save(self) -> None:
        entries = [vars(item) for item in self.items.values()]
        self.path.write_text(json.dumps({"items": entries}, indent=2))

    def add(self, item: Item) -> None:
        if item.name in self.items:
            self.items[item.name].quantity += item.quantity
        else:
            self.items[item.name] = item

    def remove(self, name: str, quantity: int) -> None:
        item = self.items[name]
        item.quantity = max(item.quantity - quantity, 0)

    def value(self) -> float:
        return sum(item.total() for item in self.items.values())

    def tagged(self, tag: str) -> list[Item]:
        return [item for item in self.items.values() if tag in item.tags]
"""


def rewrite(code: str) -> str:
    return f"Here is a Python file:\n\n{code}\nThe same file, copied exactly:\n\n"


STORY = "Once upon a time, in a small village by the sea, there lived"
GREEDY: Mapping[str, object] = {"temperature": 0}
# Sampled, with a repetition penalty: a story that does not repeat itself.
SAMPLED: Mapping[str, object] = {
    "temperature": 0.8,
    "top_k": 40,
    "top_p": 0.95,
    "repeat_penalty": 1.15,
    "seed": 7,
    "ignore_eos": True,
}
TASKS: dict[str, tuple[str, Mapping[str, object]]] = {
    "copy": (rewrite(ACCESSORS), GREEDY),
    "loose copy": (rewrite(INVENTORY), GREEDY),
    "story": (STORY, SAMPLED),
}


@dataclass
class Figures:
    rates: list[float] = field(default_factory=list)  # decode tokens/s
    drafted: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)


@dataclass
class Server:
    name: str
    command: list[str]
    probe: str
    figures: dict[str, Figures] = field(default_factory=dict)  # by task


def decode_rate(
    prompt: str, tokens: int, sampling: Mapping[str, object]
) -> tuple[float, dict[str, Any]]:
    """(decode tokens/s as the client sees it, the final event's timings) of one stream."""
    body = {"prompt": prompt, "n_predict": tokens, "stream": True, **sampling}
    first = end = 0.0
    final: dict[str, Any] = {}
    with httpx.stream("POST", BASE + "/completion", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("content") and not first:
                first = time.perf_counter()
            if event.get("stop"):
                end, final = time.perf_counter(), event
    predicted = int(final.get("tokens_predicted", 0))
    rate = (predicted - 1) / (end - first) if end > first and predicted > 1 else 0.0
    return rate, final.get("timings", {})


def measure(server: Server, index: int, tokens: int) -> None:
    process = start_server(server.command, BASE, server.probe)
    try:
        decode_rate("Warm up.", 4, GREEDY)
        for task, (prompt, sampling) in TASKS.items():
            fresh = f"Run {index} {time.monotonic_ns()}.\n{prompt}"
            rate, timings = decode_rate(fresh, tokens, sampling)
            figures = server.figures.setdefault(task, Figures())
            figures.rates.append(rate)
            figures.drafted.append(int(timings.get("draft_n", 0)))
            figures.accepted.append(int(timings.get("draft_n_accepted", 0)))
    finally:
        stop_server(process)


def servers(kinds: list[str]) -> list[Server]:
    model = str(bundled_model_path())
    peer = [
        *(llama_server_binary(), "-m", model, "--port", str(PORT), "-np", "1"),
        *("-t", str(THREADS), "-tb", str(THREADS), "-c", str(CONTEXT), "--no-webui"),
    ]
    chosen = []
    for kind in ["none", *kinds]:
        ours, theirs = spec_flags(kind, model)
        label = "plain" if kind == "none" else kind
        chosen.append(Server(f"Hearth {label}", hearth_command(PORT, *ours), "/api/extra/version"))
        chosen.append(Server(f"llama-server {label}", [*peer, *theirs], "/health"))
    return chosen


def spec_flags(kind: str, model: str) -> tuple[list[str], list[str]]:
    """Hearth's and llama-server's flags for one kind of speculation. "draft": the bundled
    model as its own draft model (no smaller model on its vocabulary is at hand), 8 tokens
    at most, the same confidence cut on both."""
    if kind == "none":
        return [], []
    if kind == "draft":
        sizes = ["--spec-draft-n-max", str(DRAFT_MAX), "--spec-draft-p-min", str(DRAFT_P_MIN)]
        return (
            ["--draftmodel", model, *sizes],
            ["--spec-type", "draft-simple", "-md", model, *sizes],
        )
    return ["--spec-type", kind], ["--spec-type", kind]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(measured: list[Server], kinds: list[str], args: argparse.Namespace) -> None:
    by_name = {server.name: server for server in measured}

    def rate(name: str, task: str) -> float:
        return median(by_name[name].figures[task].rates)

    print(
        f"\nBundled model, {THREADS} threads, context {CONTEXT}, {args.tokens} tokens, "
        f"median of {args.repeats}; decode tokens/s as the client sees it "
        "(accepted/drafted tokens, all repetitions)"
    )
    print(f"  {'server':26s}" + "".join(f"{task:>26s}" for task in TASKS))
    for server in measured:
        cells = []
        for task in TASKS:
            figures = server.figures[task]
            drafted, accepted = sum(figures.drafted), sum(figures.accepted)
            counts = f"({accepted}/{drafted})" if drafted else ""
            cells.append(f"{median(figures.rates):10.1f} {counts:>15s}")
        print(f"  {server.name:26s}" + "".join(cells))
    print("\nRatios")
    for kind in kinds:
        for task in TASKS:
            ours, peer = rate(f"Hearth {kind}", task), rate(f"llama-server {kind}", task)
            own = ours / rate("Hearth plain", task)
            theirs = peer / rate("llama-server plain", task)
            print(
                f"  {task:10s} Hearth {kind} / Hearth plain {own:.2f}, / llama-server {kind} "
                f"{ours / peer:.2f}   (llama-server {kind} / its plain {theirs:.2f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--mod", action="store_true", help="also --spec-type ngram-mod")
    parser.add_argument(
        "--draft", action="store_true", help="also a draft model (the bundled model itself)"
    )
    parser.add_argument(
        "--kinds", help="only these kinds, comma-separated (ngram-simple,ngram-mod,draft)"
    )
    args = parser.parse_args()
    kinds = [
        "ngram-simple",
        *(["ngram-mod"] if args.mod else []),
        *(["draft"] if args.draft else []),
    ]
    if args.kinds:
        kinds = args.kinds.split(",")
    measured = servers(kinds)
    # Repetitions interleave the servers, so a machine that speeds up or slows down during
    # the run affects every server alike.
    for index in range(args.repeats):
        for server in measured:
            print(f"repetition {index + 1}: {server.name}", flush=True)
            measure(server, index, args.tokens)
    report(measured, kinds, args)


if __name__ == "__main__":
    main()
