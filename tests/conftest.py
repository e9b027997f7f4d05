"""Fixtures shared by every test folder, and the hook that marks real-model tests.

Fixtures only: the helpers they are built from live in tests/support/ (servers.py: the real
server in a subprocess and the in-process one for scripted tests; hub_server.py: the local Hub).
A test that uses a fixture starting the real server on the bundled model (directly or through
another fixture) is marked `model`, so `pytest -m "not model"` (`make test-fast`) runs none.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from server.core.scheduling.engine import Engine
from server.models.files import resolve_model_path
from server.settings.config import HearthSettings
from tests.support import instruct_model
from tests.support.chat_page import SharedChromium, headless_chromium
from tests.support.gguf_rename import renamed_copy
from tests.support.hub_server import STORY_FILE, STORY_NAME, LocalHub, serve_hub
from tests.support.lora_gguf import write_lora
from tests.support.model_folder import make_model_folder
from tests.support.projector_gguf import write_projector
from tests.support.servers import (
    RunningServer,
    ask_to_stop,
    serve_in_thread,
    start_subprocess,
    wait_stopped,
)
from tests.support.shared_ssl import share_bundle_contexts

# The fixtures that start `python -m server` on the real model. A test that starts one some
# other way (its own subprocess, the launcher, a packaged build) carries the mark by hand.
REAL_MODEL_FIXTURES = frozenset({"start_hearth", "hearth"})


def pytest_configure() -> None:
    share_bundle_contexts()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # `fixturenames` is the closure: fixtures of fixtures count too.
        if REAL_MODEL_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)


# Servers started for the current module (by its fixtures or its tests): asked to stop when
# it ends. An idle one keeps ~250 MB of its own: kept to the end, the session's ~60 held
# ~15 GB of a 24 GB machine. `start_hearth(..., for_the_session=True)` servers live on.
_module_servers: list[RunningServer] = []


@pytest.fixture(scope="module", autouse=True)
def _stop_the_module_s_servers() -> Iterator[None]:
    yield
    while _module_servers:
        ask_to_stop(_module_servers.pop())  # waited for at the end of the session


@pytest.fixture(scope="session")
def start_hearth() -> Iterator[Callable[..., RunningServer]]:
    """Start `python -m server` with extra flags (tests/support/servers.start_subprocess);
    each server is asked to stop when its module ends (`for_the_session=True`: at the end of
    the session) and waited for at the end of the session."""
    started: list[RunningServer] = []

    def start(
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        stdin: int | None = None,
        trust: ssl.SSLContext | None = None,
        for_the_session: bool = False,
    ) -> RunningServer:
        server = start_subprocess(args, env=env, stdin=stdin, trust=trust)
        started.append(server)
        if not for_the_session:
            _module_servers.append(server)
        return server

    yield start
    # Told to stop all at once, then waited for: each takes a moment to shut down (its slots,
    # its prompt cache), which one after another cost half a minute at the session's end.
    for server in started:
        ask_to_stop(server)
    for server in started:
        wait_stopped(server)


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct's GGUF (a ChatML template of its own), from its registry package
    (tests/support/instruct_model.py). Start a server on it with `start_hearth(["--model",
    str(smollm2), ...])`."""
    return instruct_model.smollm2()


@pytest.fixture(scope="session")
def hearth(start_hearth: Callable[..., RunningServer]) -> RunningServer:
    """The real server with default settings on the bundled model."""
    return start_hearth([], for_the_session=True)


@pytest.fixture
def serve_engine() -> Iterator[Callable[..., RunningServer]]:
    """Run create_app(settings, engine) under uvicorn in a thread, on a free loopback port
    (tests/support/servers.serve_in_thread); each one still running is stopped after the test."""
    servers: list[RunningServer] = []

    def serve(
        engine: Engine,
        settings: HearthSettings | None = None,
        keepalive_seconds: float = 5.0,
        **app_options: Any,
    ) -> RunningServer:
        server = serve_in_thread(engine, settings, keepalive_seconds, **app_options)
        servers.append(server)
        return server

    yield serve
    for server in servers:
        assert server.http is not None and server.thread is not None
        server.http.should_exit = True
        _stopping_servers.append(server)


# In-process servers told to stop and not yet waited for. uvicorn's shutdown sleeps ~0.2 s
# (its 0.1 s tick, then 0.1 s for connections): waited for once at the end of the session
# rather than after each test, as a fifth of the fast suite's time.
_stopping_servers: list[RunningServer] = []


@pytest.fixture(scope="session", autouse=True)
def _wait_for_stopping_servers() -> Iterator[None]:
    yield
    for server in _stopping_servers:
        assert server.thread is not None
        server.thread.join(timeout=10)
        assert not server.thread.is_alive(), f"the server at {server.base_url} did not stop"


@pytest.fixture(scope="session")
def bundled() -> Path:
    """The bundled GGUF's path (assembled on first use). Reading its header or bytes is quick;
    a test that loads it into llama.cpp goes through `hearth`/`start_hearth` instead."""
    return resolve_model_path(None)


@pytest.fixture
def hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bundled: Path, story_model: Path
) -> Iterator[LocalHub]:
    """A local stand-in for the Hugging Face Hub (tests/support/hub_server.py) with repositories
    made of the bundled model and its renamed copy; huggingface_hub points at it for this test."""
    local = serve_hub(bundled, tmp_path, monkeypatch, story_model)
    yield local
    local.stop()


@pytest.fixture(scope="session")
def story_model(tmp_path_factory: pytest.TempPathFactory, bundled: Path) -> Path:
    """The bundled GGUF with another `general.name` (tests/support/gguf_rename.py): a second
    model for the hub tests, made once per session (a header rewrite and a copy: ~1 s)."""
    folder = tmp_path_factory.mktemp("story-model")
    return renamed_copy(bundled, folder / STORY_FILE, STORY_NAME)


# -- used by the server's tests and the chat page's (tests/resources/chat) --


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


@pytest.fixture(scope="session")
def guarded(start_hearth: Callable[..., RunningServer]) -> RunningServer:
    """A password (`pw`), one request at a time (`--multiuser 0`) and /metrics: the queue and
    password tests, the chat page's password prompt and the metrics route's guard."""
    return start_hearth(["--multiuser", "0", "--password", "pw", "--metrics"], for_the_session=True)


@pytest.fixture(scope="session")
def tiny_projector(bundled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real (tiny, random) Gemma 3 vision projector for the bundled model (130 KiB,
    tests/support/projector_gguf.py). Tests copy it where they need another name or folder."""
    return write_projector(tmp_path_factory.mktemp("projector") / "tiny-mmproj.gguf", bundled)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, bundled: Path) -> Path:
    """A --modeldir with the bundled weights as `story-writer` and a broken file
    (tests/support/model_folder.py), one per module."""
    return make_model_folder(tmp_path_factory.mktemp("models"), bundled)


@pytest.fixture(scope="session")
def seeing(start_hearth: Callable[..., RunningServer], tiny_projector: Path) -> RunningServer:
    """The bundled model with a tiny Gemma 3 projector of random weights (`--mmproj`,
    tests/support/projector_gguf.py): the vision tests and the chat page's image tests."""
    flags = ["--mmproj", str(tiny_projector), "--contextsize", "2048"]
    return start_hearth(flags, for_the_session=True)


@pytest.fixture(scope="session")
def lora_adapter(tmp_path_factory: pytest.TempPathFactory, bundled: Path) -> Path:
    """A real (tiny, random) LoRA adapter for the bundled model (tests/support/lora_gguf.py)."""
    return write_lora(tmp_path_factory.mktemp("lora") / "adapter.gguf", bundled)
