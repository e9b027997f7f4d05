"""Speculative decoding with a draft model (`--draftmodel`) on the real model: the bundled model
drafting for itself is accepted almost always (the counts say so), the reply agrees with the
one without speculation (log-probabilities within the batch-shape tolerance: the draft rows
change the decode's shape), batched sequences draft in their own draft-model sequences, a
sampled request and a streamed chat work; and a draft model of another vocabulary (SmolLM2's)
or a missing file is refused at load with the reason."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.core.llama.engine import LlamaCppEngine
from server.core.scheduling.engine import EngineError
from server.process.load_settings import load_settings
from server.settings.config import HearthSettings
from tests.server.core.llama.test_speculation_real import SERVER_FLAGS, copy_prompt, greedy
from tests.support.logits import assert_agree, native
from tests.support.one_turn import in_one_turn
from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]
STORY = "Once upon a time, in a small village by the sea, there lived an old fisherman who"


@pytest.fixture(scope="module")
def drafting(start_hearth: StartHearth, bundled: Path) -> RunningServer:
    return start_hearth(["--draftmodel", str(bundled), "--draftamount", "6", *SERVER_FLAGS])


def test_the_model_as_its_own_draft_is_accepted_and_changes_nothing(
    drafting: RunningServer, unspeculated: RunningServer
) -> None:
    assert "Speculative decoding: the draft model" in drafting.wait_for_output("Speculative")
    body = greedy(copy_prompt("iota"), 60, n_probs=5, ignore_eos=True)
    fast, slow = native(drafting, body), native(unspeculated, body)
    timings = fast["timings"]
    # The same weights guess: nearly every drafted token is what the model samples (a few
    # near-ties may go the other way between one-row and many-row decodes). The draft model
    # drafts only where it is sure, which copying mostly is.
    assert timings["draft_n"] >= 30, timings
    assert timings["draft_n_accepted"] >= 0.9 * timings["draft_n"], timings
    assert "draft_n" not in slow["timings"]
    assert fast["tokens_predicted"] == slow["tokens_predicted"] == 60
    assert_agree(slow, fast)


def test_two_sequences_batched_together_draft_apart(drafting: RunningServer) -> None:
    bodies = [greedy(copy_prompt(name), 30, n_probs=5) for name in ("kappa", "lambda")]
    alone = [native(drafting, body) for body in bodies]
    together = in_one_turn(drafting, [(1, partial(native, drafting, b)) for b in bodies])
    for one, other in zip(alone, together, strict=True):
        timings = other["timings"]
        assert timings["draft_n_accepted"] >= 0.8 * timings["draft_n"] > 0, timings
        assert_agree(one, other)  # each drafted from its own text, not the other's
    assert together[0]["content"] != together[1]["content"]


def test_a_sampled_request_and_a_streamed_chat_speculate(drafting: RunningServer) -> None:
    sampled = native(
        drafting,
        {"prompt": STORY, "n_predict": 40, "temperature": 0.8, "seed": 3, "ignore_eos": True},
    )
    assert sampled["tokens_predicted"] == 40
    assert sampled["timings"]["draft_n"] >= sampled["timings"]["draft_n_accepted"] > 0
    chunks = []
    body = {
        "messages": [{"role": "user", "content": STORY}],
        "max_tokens": 30,
        "temperature": 0,
        "stream": True,
    }
    with httpx.stream(
        "POST", f"{drafting.base_url}/v1/chat/completions", json=body, timeout=120
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line.removeprefix("data: ")))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.strip()
    timings = [c["timings"] for c in chunks if "timings" in c][-1]
    assert timings["draft_n"] > 0


def engine_with_draft(model: Path, draft: Path | str) -> Any:
    settings = HearthSettings(contextsize=512, threads=2, draftmodel=str(draft))
    return LlamaCppEngine.load(model, load_settings(settings))


@pytest.mark.model
def test_a_draft_model_of_another_vocabulary_is_refused(bundled: Path, smollm2: Path) -> None:
    with pytest.raises(EngineError) as refused:
        engine_with_draft(bundled, smollm2)
    message = str(refused.value)
    assert f"--draftmodel {smollm2.name} cannot draft for {bundled.name}" in message
    assert "49152 tokens, the model 262144" in message and "\n" not in message


@pytest.mark.model
def test_a_missing_draft_model_is_refused(bundled: Path, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"--draftmodel .*nowhere\.gguf: no such file"):
        engine_with_draft(bundled, tmp_path / "nowhere.gguf")
