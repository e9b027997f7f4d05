"""gpt-oss's harmony channels on the real server: SmolLM2 with the built-in `gpt-oss` template,
a grammar writing an analysis message, then a final one. The thought and the answer are split,
and control tokens are rendered as text only for a harmony reply (gpt-oss's channel markers are
control tokens; another model's must not leak into its answer)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]
# <[1]>: the control token `<|im_start|>` of SmolLM2's vocabulary, written by the model itself.
HARMONY = (
    'root ::= "<|channel|>analysis<|message|>" [a-z ]{5,20} "<|end|><|start|>assistant'
    '<|channel|>final<|message|>" [A-Z] [a-z]{2,8} <[1]>'
)
PLAIN = "root ::= [A-Z] [a-z]{2,8} <[1]>"
USER = [{"role": "user", "content": "What is two and two?"}]


def chat(server: RunningServer, grammar: str) -> dict[str, Any]:
    body = {"model": "m", "messages": USER, "max_tokens": 120, "grammar": grammar}
    answer = httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    message: dict[str, Any] = answer.json()["choices"][0]["message"]
    return message


@pytest.fixture(scope="module")
def harmony(start_hearth: StartHearth, smollm2: Path) -> RunningServer:
    return start_hearth(["--model", str(smollm2), "--chat-template", "gpt-oss"])


def test_a_harmony_reply_is_split_by_channel(harmony: RunningServer) -> None:
    message = chat(harmony, HARMONY)
    thought, answer = message.get("reasoning_content"), message["content"]
    assert thought and set(thought) <= set("abcdefghijklmnopqrstuvwxyz "), message
    assert "<|" not in thought and answer.endswith("<|im_start|>"), message
    assert answer[0].isupper() and answer[:-12].isalpha(), message


def test_other_replies_keep_control_tokens_out(start_hearth: StartHearth, smollm2: Path) -> None:
    server = start_hearth(["--model", str(smollm2)])  # its own ChatML template
    answer = chat(server, PLAIN)["content"]
    assert answer.isalpha() and "<|" not in answer, answer
