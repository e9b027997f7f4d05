"""Fixtures of the server tests: a headless browser, an ollama client on the real server, and
a model folder for model switching. The servers themselves are in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ollama
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.chat_page import headless_chromium
from tests.support.model_folder import make_model_folder
from tests.support.servers import RunningServer


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    """A headless Chromium for the chat page tests."""
    with headless_chromium(tmp_path / "profile") as driver:
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
