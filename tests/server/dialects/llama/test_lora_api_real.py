"""LoRA adapters over real HTTP on the real model (`--lora` with a LoRA written for the bundled
model, tests/support/lora_gguf.py): GET and POST /lora-adapters, a request's own `lora` scales
on llama-server's native and OpenAI routes, two requests of other scales batched together each
answered as alone (their decodes kept apart), and a file that is no LoRA for the model stopping
the start with the reason."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.process.exit_codes import EXIT_MODEL_FAILED
from tests.support.logits import assert_agree, native
from tests.support.one_turn import in_one_turn
from tests.support.servers import ROOT, RunningServer, free_port

StartHearth = Callable[[Sequence[str]], RunningServer]
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def lora_server(start_hearth: StartHearth, lora_adapter: Path) -> RunningServer:
    return start_hearth(["--lora", str(lora_adapter), "--parallelrequests", "2"])


def greedy(lora: float | None = None, tokens: int = 3, **extra: Any) -> dict[str, Any]:
    body = {"prompt": PROMPT, "n_predict": tokens, "temperature": 0, "n_probs": 5, **extra}
    return body if lora is None else {**body, "lora": [{"id": 0, "scale": lora}]}


def first_token(answer: dict[str, Any]) -> int:
    return int(answer["completion_probabilities"][0]["id"])


@contextmanager
def global_scale(lora_server: RunningServer, scale: float) -> Iterator[None]:
    """The scale every request gets, for a while (back to --lora's 1 after)."""
    url = f"{lora_server.base_url}/lora-adapters"
    assert httpx.post(url, json=[{"id": 0, "scale": scale}]).json() == {"success": True}
    try:
        yield
    finally:
        httpx.post(url, json=[{"id": 0, "scale": 1.0}])


def test_the_adapter_is_listed_and_its_scale_set(
    lora_server: RunningServer, lora_adapter: Path
) -> None:
    url = f"{lora_server.base_url}/lora-adapters"
    entry = {"id": 0, "path": str(lora_adapter), "task_name": "", "prompt_prefix": ""}
    assert httpx.get(url).json() == [{**entry, "scale": 1.0}]
    with global_scale(lora_server, 0.25):
        assert httpx.get(url).json() == [{**entry, "scale": 0.25}]
    refused = httpx.post(url, json=[{"id": 1, "scale": 1.0}])
    assert refused.status_code == 400 and "invalid adapter id 1" in refused.text


def test_the_global_scale_and_a_request_s_own(lora_server: RunningServer) -> None:
    with_adapter = native(lora_server, greedy())  # --lora's scale, 1
    alone = native(lora_server, greedy(0.0))  # the model alone
    assert first_token(with_adapter) != first_token(alone)
    assert_agree(with_adapter, native(lora_server, greedy(1.0)))
    with global_scale(lora_server, 0.0):
        assert_agree(alone, native(lora_server, greedy()))
        assert_agree(with_adapter, native(lora_server, greedy(1.0)))  # its own wins


def test_openai_routes_take_a_request_s_scales(lora_server: RunningServer) -> None:
    def completion(scale: float) -> str:
        body = {"prompt": PROMPT, "max_tokens": 1, "temperature": 0, "logprobs": 1}
        answer = httpx.post(
            f"{lora_server.base_url}/v1/completions",
            json={**body, "lora": [{"id": 0, "scale": scale}]},
            timeout=120,
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["choices"][0]["logprobs"]["tokens"][0])

    def chat(scale: float) -> str:
        body = {
            "messages": [{"role": "user", "content": "Name the capital of France."}],
            "max_tokens": 2,
            "temperature": 0,
            "lora": [{"id": 0, "scale": scale}],
        }
        answer = httpx.post(f"{lora_server.base_url}/v1/chat/completions", json=body, timeout=120)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["choices"][0]["message"]["content"])

    assert completion(0.0) != completion(1.0)
    assert chat(0.0) != chat(1.0)


def test_requests_of_other_scales_batched_together_each_get_their_own(
    lora_server: RunningServer,
) -> None:
    bodies = [greedy(scale, tokens=12, cache_prompt=False) for scale in (0.0, 1.0)]
    alone = [native(lora_server, body) for body in bodies]
    together = in_one_turn(
        lora_server, [(1, partial(native, lora_server, body)) for body in bodies]
    )
    for one, other in zip(alone, together, strict=True):
        assert other["tokens_predicted"] == 12
        assert_agree(one, other)
    assert first_token(together[0]) != first_token(together[1])


@pytest.mark.model
def test_a_file_that_is_no_lora_for_the_model_stops_the_start(bundled: Path) -> None:
    flags = ["--skiplauncher", "--port", str(free_port()), "--lora", str(bundled)]
    started = subprocess.run(
        [sys.executable, "-m", "server", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == EXIT_MODEL_FAILED
    assert f"--lora {bundled}: not a LoRA adapter" in started.stdout + started.stderr
