"""The chat page's Story mode, read and driven in headless Chromium."""

from __future__ import annotations

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

# The page helpers; the headless Chromium fixture `browser` is in tests/server/conftest.py.


def story(browser: WebDriver) -> str:
    return str(browser.find_element(By.ID, "story").get_attribute("value"))


def story_done(browser: WebDriver) -> bool:
    status = browser.find_element(By.ID, "status").text
    return bool(browser.find_element(By.ID, "story-continue").is_enabled() and "tokens/s" in status)


def set_field(browser: WebDriver, field: str, value: str) -> None:
    element = browser.find_element(By.ID, field)
    element.clear()
    element.send_keys(value)
