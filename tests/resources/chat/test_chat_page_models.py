"""The chat page's model picker (issue 12) in a real headless Chromium against the live server:
hidden with one model, listing --modeldir's models, switching the server, remembered."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver as Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.select import Select

from tests.support.chat_page import assistant_text, until
from tests.support.model_folder import OTHER, SERVED
from tests.support.servers import RunningServer


@pytest.fixture(scope="module")
def two_models(
    model_dir: Path,
    start_hearth: Callable[..., RunningServer],
) -> RunningServer:
    return start_hearth(["--modeldir", str(model_dir), "--contextsize", "1024"])


def picker_state(browser: WebDriver) -> str:
    """ "loading", then "ready" once /v1/models answered or "failed" when it did not."""
    return str(browser.find_element(By.ID, "model-picker").get_attribute("data-state"))


def model_select(browser: WebDriver) -> Select:
    return Select(browser.find_element(By.ID, "model"))


def listed(browser: WebDriver) -> list[str]:
    return [str(option.get_attribute("value")) for option in model_select(browser).options]


def send_and_wait(browser: WebDriver, text: str) -> None:
    """Send `text` and wait until the reply has finished, without any notice."""
    before = len(browser.find_elements(By.CSS_SELECTOR, ".turn.assistant"))
    browser.find_element(By.ID, "prompt").send_keys(text)
    browser.find_element(By.ID, "send").click()
    until(lambda: len(browser.find_elements(By.CSS_SELECTOR, ".turn.assistant")) == before + 1)
    until(lambda: browser.find_element(By.ID, "send").is_enabled(), timeout=60)
    assert not browser.find_elements(By.CSS_SELECTOR, ".notice")


def fresh_chat(browser: WebDriver, max_tokens: str = "4") -> None:
    # These models have no chat template: the page opens in Story mode; chat is one click.
    browser.find_element(By.ID, "mode-chat").click()
    browser.find_element(By.ID, "clear").click()
    field = browser.find_element(By.ID, "max-tokens")
    field.clear()
    field.send_keys(max_tokens)


def test_one_model_no_picker(browser: WebDriver, hearth: RunningServer) -> None:
    browser.get(hearth.base_url + "/")
    until(lambda: picker_state(browser) == "ready")
    assert len(listed(browser)) == 1  # the one model, named in requests, but nothing to pick
    assert not browser.find_element(By.ID, "model-picker").is_displayed()


def test_the_picker_switches_the_model_and_is_remembered(
    browser: WebDriver,
    two_models: RunningServer,
) -> None:
    browser.get(two_models.base_url + "/")
    until(lambda: picker_state(browser) == "ready")
    picker = browser.find_element(By.ID, "model-picker")
    assert picker.is_displayed() and picker.text.startswith("Model")
    assert listed(browser) == [SERVED, OTHER]
    assert model_select(browser).first_selected_option.text == SERVED  # the default

    fresh_chat(browser)
    model_select(browser).select_by_value(OTHER)
    send_and_wait(browser, "Once upon a time")
    loaded = two_models.wait_for_output(f"Loaded {OTHER}.gguf", timeout=30)
    after = two_models.output.index(loaded) + 1
    reply = assistant_text(browser)

    browser.refresh()
    until(lambda: picker_state(browser) == "ready")
    assert model_select(browser).first_selected_option.text == OTHER  # remembered
    assert len(browser.find_elements(By.CSS_SELECTOR, ".turn")) == 2
    assert assistant_text(browser) == reply  # the conversation came back too

    model_select(browser).select_by_value(SERVED)
    send_and_wait(browser, "And then")
    two_models.wait_for_output(f"Unloading {OTHER}", timeout=30, after=after)


def test_no_model_list_hides_the_picker_and_the_page_still_works(
    browser: WebDriver,
    two_models: RunningServer,
) -> None:
    assert isinstance(browser, Chrome)
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/v1/models"]})
    browser.get(two_models.base_url + "/")
    until(lambda: picker_state(browser) == "failed")
    assert not browser.find_element(By.ID, "model-picker").is_displayed()
    fresh_chat(browser)
    send_and_wait(browser, "Hello")  # no model named: the server's own model answers


def test_without_a_choice_the_picker_shows_the_model_serving_now(
    browser: WebDriver,
    two_models: RunningServer,
) -> None:
    """Opening the page must not switch models: it picks the one another client loaded."""
    loaded = httpx.post(
        f"{two_models.base_url}/api/generate", json={"model": OTHER, "prompt": ""}, timeout=60
    )
    assert loaded.json()["done_reason"] == "load"
    browser.get(two_models.base_url + "/")
    until(lambda: picker_state(browser) == "ready")
    assert model_select(browser).first_selected_option.text == OTHER
