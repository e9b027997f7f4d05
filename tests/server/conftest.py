"""Fixtures of the server tests: a headless browser (one Chromium, a fresh tab per test), an
ollama client on the real server, a model folder for model switching, and the real servers
several modules share. The servers are started by tests/conftest.py's `start_hearth`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import ollama
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.chat_page import SharedChromium, headless_chromium
from tests.support.fim_gguf import write_fim_gguf
from tests.support.model_folder import make_model_folder
from tests.support.projector_gguf import write_projector
from tests.support.servers import RunningServer

StartHearth = Callable[..., RunningServer]


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedChromium]:
    """One headless Chromium for the session (a start and quit per test cost ~0.8 s)."""
    with headless_chromium(tmp_path_factory.mktemp("chromium") / "profile") as driver:
        shared = SharedChromium(driver)
        yield shared
        shared.close()


@pytest.fixture
def browser(chromium: SharedChromium) -> Iterator[WebDriver]:
    """A headless Chromium for the chat page tests: the session's, in a tab and browsing
    context of this test's own (tests/support/chat_page.SharedChromium), as fresh as a new
    profile."""
    with chromium.fresh_tab() as driver:
        yield driver


@pytest.fixture(scope="module")
def llama(hearth: RunningServer) -> ollama.Client:
    """The official ollama client on the real server."""
    return ollama.Client(host=hearth.base_url)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, bundled: Path) -> Path:
    """A --modeldir with the bundled weights as `story-writer` and a broken file
    (tests/support/model_folder.py), one per module."""
    return make_model_folder(tmp_path_factory.mktemp("models"), bundled)


# Real servers with the same flags in several modules, started once for the session (a start
# costs 3-5 s of CPU on 2 cores) and left running to its end. A test on one leaves it as it
# found it: idle, with nothing loaded, saved or set that a test of another module could see.


@pytest.fixture(scope="session")
def seeing(
    start_hearth: StartHearth, bundled: Path, tmp_path_factory: pytest.TempPathFactory
) -> RunningServer:
    """The bundled model with a tiny Gemma 3 projector of random weights (`--mmproj`,
    tests/support/projector_gguf.py): the vision tests and the chat page's image tests."""
    projector = write_projector(tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf", bundled)
    return start_hearth(["--mmproj", str(projector), "--contextsize", "2048"], for_the_session=True)


@pytest.fixture(scope="session")
def guarded(start_hearth: StartHearth) -> RunningServer:
    """A password (`pw`), one request at a time (`--multiuser 0`) and /metrics: the queue and
    password tests, the chat page's password prompt and the metrics route's guard."""
    return start_hearth(["--multiuser", "0", "--password", "pw", "--metrics"], for_the_session=True)


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
