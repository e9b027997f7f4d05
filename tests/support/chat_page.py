"""Driving the chat page in a real headless Chromium (Debian's chromium + chromium-driver,
through selenium): the `browser` fixture (tests/server/conftest.py) and what the chat page
tests share."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import websocket
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1100, 800  # the window the page is tested in


@contextmanager
def headless_chromium(profile: Path) -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium with its own profile; skipped where Chromium is missing
    (an error in CI, which installs it: see .ci/run)."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        if os.environ.get("CI"):
            raise RuntimeError("CI must install chromium and chromium-driver (see .ci/run)")
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={WIDTH},{HEIGHT}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


class SharedChromium:
    """One headless Chromium for many tests, each in a tab of a browsing context of its own:
    storage, cookies, cache and device settings as a fresh profile's, for ~0.1 s where a
    Chromium start and quit cost ~0.8 s. The contexts are made through the browser's own
    DevTools endpoint: chromedriver sends CDP commands to the page, which may not make them."""

    def __init__(self, driver: webdriver.Chrome) -> None:
        self.driver = driver
        self._home = driver.current_window_handle  # kept open: the browser lives on
        address = driver.capabilities["goog:chromeOptions"]["debuggerAddress"]
        endpoint = httpx.get(f"http://{address}/json/version", timeout=10).json()
        self._devtools = websocket.create_connection(
            endpoint["webSocketDebuggerUrl"], timeout=30, suppress_origin=True
        )
        self._sent = 0

    def call(self, method: str, **params: object) -> dict[str, Any]:
        """A DevTools command to the browser itself; its result."""
        self._sent += 1
        self._devtools.send(json.dumps({"id": self._sent, "method": method, "params": params}))
        while True:
            answer = json.loads(self._devtools.recv())
            if answer.get("id") == self._sent:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return dict(answer["result"])

    @contextmanager
    def fresh_tab(self) -> Iterator[webdriver.Chrome]:
        """The driver switched to a new tab in a new browsing context, both gone after."""
        context = self.call("Target.createBrowserContext")["browserContextId"]
        tab = self.call(
            "Target.createTarget",
            url="about:blank",
            browserContextId=context,
            width=WIDTH,
            height=HEIGHT,
        )["targetId"]
        self.driver.switch_to.window(tab)
        try:
            yield self.driver
        finally:
            self.driver.switch_to.window(self._home)
            self.call("Target.disposeBrowserContext", browserContextId=context)

    def close(self) -> None:
        self._devtools.close()


def assistant_text(browser: WebDriver) -> str:
    turns = browser.find_elements(By.CSS_SELECTOR, ".turn.assistant")
    return str(turns[-1].text) if turns else ""


def until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the page never got there"
        time.sleep(0.05)


def page_ready(browser: WebDriver) -> bool:
    """The page has asked for the models and chosen its mode (Story for a base model)."""
    return bool(browser.execute_script("return document.body.dataset.ready === 'true'"))


def open_page(browser: WebDriver, url: str, mode: str | None = "chat") -> None:
    """Load the page, wait until it is ready, then pick `mode` ("chat" or "story") as a user
    would; the bundled model has no chat template, so a fresh page opens in Story mode."""
    browser.get(url)
    until(lambda: page_ready(browser))
    if mode is not None:
        browser.find_element(By.ID, f"mode-{mode}").click()
        until(lambda: browser.execute_script("return document.body.dataset.mode") == mode)


def reply_done(browser: WebDriver) -> bool:
    """The reply has finished: Send is usable again and the final speed is shown."""
    status = browser.find_element(By.ID, "status").text
    return bool(browser.find_element(By.ID, "send").is_enabled() and "tokens/s" in status)
