"""Speculative decoding from n-grams (`--spec-type ngram-simple`) on the real model, over real
HTTP: copying text drafts and accepts many tokens, the reply agrees with the one without
speculation (log-probabilities within the batch-shape tolerance: the draft rows change the
decode's shape), batched sequences speculate together, sampled and grammar-bound requests
work, and the counts reach `timings`, KoboldCpp's perf and `/metrics`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import httpx
import pytest

from tests.support.logits import assert_agree, native
from tests.support.metrics_reader import scrape
from tests.support.one_turn import in_one_turn
from tests.support.real_server import perf
from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]
# The speculating servers' flags; `unspeculated` (tests/server/conftest.py, shared with
# test_draft_model_real.py) has the same without speculation.
SERVER_FLAGS = ["--parallelrequests", "2", "--contextsize", "4096", "--metrics"]


WORDS = ("apple", "river", "stone", "cloud", "lantern", "harbor", "meadow", "copper", "willow")


def copy_prompt(name: str) -> str:
    """A Python file and the request to copy it: the bundled model copies this one exactly."""
    code = "\n".join(
        f"def {name}_{word}(items):\n    return [item.{word} for item in items if item.{word}]\n"
        for word in WORDS
    )
    return f"Here is a Python file:\n\n{code}\nThe same file, copied exactly:\n\n"


def counted_lines() -> str:
    """Numbered copies of one line: each next line repeats the last but for its number, so
    drafts are accepted up to the number and rejected there."""
    line = "the quick brown fox jumps over the lazy dog and runs far into the dark forest."
    return "".join(f"Line {number}: {line}\n" for number in range(1, 9))


@pytest.fixture(scope="module")
def speculating(start_hearth: StartHearth) -> RunningServer:
    return start_hearth(["--spec-type", "ngram-simple", *SERVER_FLAGS])


def greedy(prompt: str, tokens: int = 120, **extra: Any) -> dict[str, Any]:
    return {"prompt": prompt, "n_predict": tokens, "temperature": 0, **extra}


def test_drafts_accepted_and_rejected_leave_the_reply_as_without_speculation(
    speculating: RunningServer, unspeculated: RunningServer
) -> None:
    assert "Speculative decoding: ngram-simple" in speculating.wait_for_output("Speculative")
    body = greedy(counted_lines(), 80, n_probs=5)
    fast, slow = native(speculating, body), native(unspeculated, body)
    timings = fast["timings"]
    assert timings["draft_n"] > timings["draft_n_accepted"] > 0, timings  # both kinds
    assert "draft_n" not in slow["timings"]  # as llama-server: only when it drafted
    assert fast["tokens_predicted"] == slow["tokens_predicted"] == 80
    # Same tokens with the same log-probabilities (within the batch-shape tolerance), up to
    # a near-tie that went the other way: a draft token kept where the model would not
    # have sampled it would part from the reply without speculation.
    assert_agree(slow, fast)


def test_copying_is_mostly_accepted_drafts(speculating: RunningServer) -> None:
    answer = native(speculating, greedy(copy_prompt("alpha")))
    timings = answer["timings"]
    # Most of the copy comes from accepted drafts: far fewer decodes than tokens.
    assert timings["draft_n_accepted"] > 0.6 * timings["predicted_n"], timings
    assert timings["draft_n"] >= timings["draft_n_accepted"]
    assert answer["content"].startswith("def alpha_apple(items):")


def test_two_sequences_batched_together_both_speculate(speculating: RunningServer) -> None:
    bodies = [greedy(copy_prompt(name), n_probs=5) for name in ("beta", "gamma")]
    alone = [native(speculating, body) for body in bodies]
    together = in_one_turn(speculating, [(1, partial(native, speculating, b)) for b in bodies])
    for one, other in zip(alone, together, strict=True):
        assert other["timings"]["draft_n_accepted"] > 0.3 * other["timings"]["predicted_n"]
        assert_agree(one, other)  # each read its own rows of the shared decodes
    assert together[0]["content"] != together[1]["content"]


def test_a_sampled_request_speculates_too(speculating: RunningServer) -> None:
    body = {
        "prompt": copy_prompt("delta"),
        "n_predict": 80,
        "temperature": 0.7,
        "seed": 5,
        "ignore_eos": True,
    }
    answer = native(speculating, body)
    assert answer["tokens_predicted"] == 80
    assert answer["timings"]["draft_n"] >= answer["timings"]["draft_n_accepted"] > 0


def test_a_grammar_bound_request_speculates_within_its_grammar(
    speculating: RunningServer,
) -> None:
    body = greedy("Write b:", 40, grammar='root ::= "b" root', ignore_eos=True)
    answer = native(speculating, body)
    assert set(answer["content"]) == {"b"}
    assert answer["tokens_predicted"] == 40
    assert answer["timings"]["draft_n_accepted"] > 0


def test_counts_reach_the_metrics_the_openai_timings_and_koboldcpp_s_perf(
    speculating: RunningServer,
) -> None:
    before = scrape(speculating.base_url)
    completion = httpx.post(
        f"{speculating.base_url}/v1/completions",
        json={"prompt": copy_prompt("epsilon"), "max_tokens": 60, "temperature": 0},
        timeout=120,
    ).json()
    after = scrape(speculating.base_url)
    timings = completion["timings"]
    assert timings["draft_n"] >= timings["draft_n_accepted"] > 0

    def grew(name: str) -> float:
        return after.value(f"llamacpp:{name}") - before.value(f"llamacpp:{name}")

    assert grew("spec_decode_num_draft_tokens_total") == timings["draft_n"]
    assert grew("spec_decode_num_accepted_tokens_total") == timings["draft_n_accepted"]
    assert 0 < grew("spec_decode_num_drafts_total") <= timings["draft_n"]
    figures = perf(speculating)
    assert figures["last_draft_success"] == timings["draft_n_accepted"]
    assert figures["last_draft_failed"] == timings["draft_n"] - timings["draft_n_accepted"]
