"""Fixtures of the server tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.chat_page import headless_chromium


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    """A headless Chromium for the chat page tests."""
    with headless_chromium(tmp_path / "profile") as driver:
        yield driver
