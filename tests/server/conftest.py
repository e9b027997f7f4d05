"""Fixtures of the server tests: an ollama client on the real server, the openai and anthropic
clients on the instruct one, and the real servers several modules share (those the chat page's
tests share too: the browser, the model folder, the `guarded` and `seeing` servers, are in
tests/conftest.py). The servers are started by tests/conftest.py's `start_hearth`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anthropic
import ollama
import openai
import pytest

from tests.support.fim_gguf import write_fim_gguf
from tests.support.servers import RunningServer

StartHearth = Callable[..., RunningServer]


@pytest.fixture(scope="module")
def llama(hearth: RunningServer) -> ollama.Client:
    """The official ollama client on the real server."""
    return ollama.Client(host=hearth.base_url)


# Real servers with the same flags in several modules, started once for the session (a start
# costs 3-5 s of CPU on 2 cores) and left running to its end. A test on one leaves it as it
# found it: idle, with nothing loaded, saved or set that a test of another module could see.


@pytest.fixture(scope="session")
def metered(start_hearth: StartHearth) -> RunningServer:
    """/metrics and two requests in flight at most (`--multiuser 2`): one running, one
    waiting. The metrics tests and the queue's refusals."""
    return start_hearth(["--metrics", "--multiuser", "2"], for_the_session=True)


@pytest.fixture(scope="session")
def seeded(start_hearth: StartHearth) -> RunningServer:
    """Two slots (requests and choices generate together) and llama-server's `--seed 42`
    (test_llama_server_chat_real.SEED): the n-choices tests and the sampling tests that batch."""
    return start_hearth(["--parallelrequests", "2", "--seed", "42"], for_the_session=True)


@pytest.fixture(scope="session")
def uncached(start_hearth: StartHearth) -> RunningServer:
    """No prompt cache (`--cacheram 0`): what a returning conversation is read afresh on, and
    KoboldCpp's save states with nothing else keeping a prompt."""
    return start_hearth(["--contextsize", "2048", "--cacheram", "0"], for_the_session=True)


@pytest.fixture(scope="session")
def unspeculated(start_hearth: StartHearth) -> RunningServer:
    """The replies that speculation (n-grams, a draft model) must leave unchanged: the flags
    of the speculating servers (test_speculation_real.SERVER_FLAGS), without speculation."""
    return start_hearth(
        ["--parallelrequests", "2", "--contextsize", "4096", "--metrics"], for_the_session=True
    )


@pytest.fixture(scope="session")
def fim_server(
    start_hearth: StartHearth, tmp_path_factory: pytest.TempPathFactory
) -> RunningServer:
    """A tiny model of random weights whose vocabulary has fill-in-the-middle tokens and adds
    BOS and EOS (tests/support/fim_gguf.py): /infill's prompts, /tokenize's special tokens."""
    model = write_fim_gguf(tmp_path_factory.mktemp("fim") / "tiny-fim.gguf")
    return start_hearth(["--model", str(model), "--threads", "1"], for_the_session=True)


@pytest.fixture(scope="session")
def instruct(start_hearth: StartHearth, smollm2: Path) -> RunningServer:
    """SmolLM2-135M-Instruct (a ChatML template of its own, with no tool-call format) in a
    2048-token context: the tool-call and structured-output tests."""
    return start_hearth(["--model", str(smollm2), "--contextsize", "2048"], for_the_session=True)


@pytest.fixture(scope="module")
def instruct_oai(instruct: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{instruct.base_url}/v1", api_key="x", max_retries=0)


@pytest.fixture(scope="module")
def instruct_claude(instruct: RunningServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=instruct.base_url, api_key="x", max_retries=0)
