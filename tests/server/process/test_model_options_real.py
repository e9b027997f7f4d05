"""KoboldCpp's --nobostoken and --genlimit end to end: `python -m server` on the bundled model,
over real HTTP, beside the default server (the `hearth` fixture)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest

from tests.support.servers import RunningServer

StartHearth = Callable[[Sequence[str]], RunningServer]
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def no_bos(start_hearth: StartHearth) -> RunningServer:
    return start_hearth(["--nobostoken", "--genlimit", "5"])


def complete(server: RunningServer, **body: Any) -> dict[str, Any]:
    body = {"prompt": PROMPT, "temperature": 0, "cache_prompt": False, **body}
    response = httpx.post(f"{server.base_url}/completion", json=body, timeout=120)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_nobostoken_reads_the_prompt_without_bos(
    hearth: RunningServer, no_bos: RunningServer
) -> None:
    plain = httpx.post(
        f"{hearth.base_url}/tokenize", json={"content": PROMPT, "add_special": False}
    ).json()["tokens"]
    with_bos = httpx.post(
        f"{hearth.base_url}/tokenize", json={"content": PROMPT, "add_special": True}
    ).json()["tokens"]
    assert with_bos == [2, *plain]  # Gemma's BOS, which the model asks for
    assert complete(hearth, n_predict=1)["tokens_evaluated"] == len(plain) + 1
    assert complete(no_bos, n_predict=1)["tokens_evaluated"] == len(plain)


def test_genlimit_caps_what_any_request_generates(no_bos: RunningServer) -> None:
    capped = complete(no_bos, n_predict=40, ignore_eos=True)
    assert (capped["tokens_predicted"], capped["stop_type"]) == (5, "limit")
    kobold = httpx.post(
        f"{no_bos.base_url}/api/v1/generate",
        json={"prompt": PROMPT, "max_length": 40, "ban_eos_token": True},
        timeout=120,
    ).json()["results"][0]
    assert (kobold["completion_tokens"], kobold["finish_reason"]) == (5, "length")
    assert complete(no_bos, n_predict=3, ignore_eos=True)["tokens_predicted"] == 3  # under it
