"""The chat page's Story mode (KoboldAI's generate/stream) and its phone layout, in a real
headless Chromium against the live server on the bundled model."""

from __future__ import annotations

from typing import Any

import httpx
from selenium.webdriver.chrome.webdriver import WebDriver as Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

# The page helpers; the headless Chromium fixture `browser` is in tests/server/conftest.py.
from tests.support.chat_page import (
    open_page,
    page_ready,
    until,
)
from tests.support.real_server import perf, wait_for
from tests.support.servers import RunningServer
from tests.support.story_page import set_field, story, story_done


def continue_story(browser: WebDriver, button: str = "story-continue") -> None:
    browser.execute_script("document.getElementById('status').textContent = '';")
    browser.find_element(By.ID, button).click()
    until(lambda: story_done(browser), timeout=90)


def test_a_base_model_opens_in_story_mode_and_says_why(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    props = httpx.get(hearth.base_url + "/props").json()
    assert props["chat_template"] == ""  # the bundled model is a base model
    open_page(browser, hearth.base_url + "/", mode=None)
    assert browser.execute_script("return document.body.dataset.mode") == "story"
    assert browser.find_element(By.ID, "mode-story").get_attribute("aria-pressed") == "true"
    reason = browser.find_element(By.ID, "mode-reason")
    assert reason.is_displayed() and "no chat template" in reason.text
    assert browser.find_element(By.ID, "story").is_displayed()
    assert not browser.find_element(By.ID, "prompt").is_displayed()

    browser.find_element(By.ID, "mode-chat").click()  # free to switch, and it is remembered
    assert browser.find_element(By.ID, "prompt").is_displayed()
    assert not reason.is_displayed()
    browser.refresh()
    until(lambda: page_ready(browser))
    assert browser.execute_script("return document.body.dataset.mode") == "chat"


def test_continue_undo_retry_memory_and_kept_across_reloads(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    open_page(browser, hearth.base_url + "/", mode="story")
    set_field(browser, "max-tokens", "12")
    browser.find_element(By.CSS_SELECTOR, "#memory-box summary").click()
    memory = "The story is told by an old sailor who loves the sea.\n"
    set_field(browser, "memory", memory)
    start = "The lighthouse keeper climbed the stairs"
    set_field(browser, "story", start)
    for nothing_yet in ("story-undo", "story-retry"):  # no continuation to act on
        assert not browser.find_element(By.ID, nothing_yet).is_enabled()

    continue_story(browser)
    first = story(browser)
    assert first.startswith(start) and len(first) > len(start)
    # The memory went first in the prompt the model read: the server counted both.
    counted = httpx.post(
        hearth.base_url + "/api/extra/tokencount", json={"prompt": memory + start}
    ).json()["value"]
    assert abs(perf(hearth)["last_input_count"] - counted) <= 1
    context = browser.find_element(By.ID, "context").text
    assert context.startswith("Context ") and context.endswith(" / 4096")

    continue_story(browser)
    second = story(browser)
    assert second.startswith(first) and len(second) > len(first)

    continue_story(browser, "story-retry")  # the last continuation is written anew
    retried = story(browser)
    assert retried.startswith(first) and len(retried) > len(first)
    browser.find_element(By.ID, "story-undo").click()
    assert story(browser) == first  # a retry replaced the step: one Undo takes it away

    browser.refresh()
    until(lambda: page_ready(browser))
    assert browser.execute_script("return document.body.dataset.mode") == "story"
    assert story(browser) == first
    assert browser.find_element(By.ID, "memory").get_attribute("value") == memory
    browser.find_element(By.ID, "story-undo").click()
    assert story(browser) == start
    assert not browser.find_element(By.ID, "story-undo").is_enabled()


def test_story_stop_aborts_on_the_server(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    open_page(browser, hearth.base_url + "/", mode="story")
    set_field(browser, "max-tokens", "400")
    set_field(browser, "story", "Chapter one. The storm began at midnight, and")
    browser.find_element(By.ID, "story-continue").click()
    until(lambda: len(story(browser)) > 80)
    grown = len(story(browser))
    until(lambda: len(story(browser)) > grown + 10)  # it grows while streaming
    assert browser.find_element(By.ID, "story").get_attribute("readonly") is not None
    assert perf(hearth)["idle"] == 0
    browser.find_element(By.ID, "stop").click()
    until(lambda: browser.find_element(By.ID, "status").text == "Stopped.")
    wait_for(lambda: perf(hearth)["idle"] == 1, timeout=1.0)
    kept = story(browser)
    assert browser.find_element(By.ID, "story").get_attribute("readonly") is None
    browser.refresh()
    until(lambda: page_ready(browser))
    assert story(browser) == kept  # what was written before Stop is kept


def phone(browser: WebDriver) -> None:
    """A 390 px wide phone screen (Chromium's window cannot be made that narrow)."""
    assert isinstance(browser, Chrome)
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True},
    )


def inside(browser: WebDriver, element_id: str) -> dict[str, Any]:
    return dict(
        browser.execute_script(
            """const r = document.getElementById(arguments[0]).getBoundingClientRect();
               return {left: r.left, right: r.right, top: r.top, bottom: r.bottom,
                       width: r.width, fits: r.left >= 0 && r.right <= innerWidth
                         && r.top >= 0 && r.bottom <= innerHeight};""",
            element_id,
        )
    )


def test_the_page_works_390_px_wide(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    phone(browser)
    open_page(browser, hearth.base_url + "/")
    assert browser.execute_script("return innerWidth") == 390
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390
    # The sidebar folds away, the settings too; the prompt and its buttons fit the screen.
    assert not browser.find_element(By.ID, "sidebar").is_displayed()
    assert not browser.find_element(By.ID, "max-tokens").is_displayed()
    for element_id in ("prompt", "send", "stop", "toggle-sidebar", "mode-story"):
        assert inside(browser, element_id)["fits"], element_id
    assert inside(browser, "prompt")["width"] > 300

    browser.find_element(By.ID, "settings-toggle").click()
    set_field(browser, "max-tokens", "6")
    browser.find_element(By.ID, "settings-toggle").click()

    browser.find_element(By.ID, "toggle-sidebar").click()
    assert inside(browser, "sidebar")["fits"]
    browser.find_element(By.ID, "clear").click()  # a new chat closes the sidebar again
    until(lambda: not browser.find_element(By.ID, "sidebar").is_displayed())

    browser.find_element(By.ID, "prompt").send_keys("Hello from a phone")
    browser.find_element(By.ID, "send").click()
    until(lambda: "tokens/s" in browser.find_element(By.ID, "status").text, timeout=60)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390
    reply = browser.find_elements(By.CSS_SELECTOR, ".turn.assistant")[-1]
    assert reply.rect["x"] >= 0 and reply.rect["x"] + reply.rect["width"] <= 390

    browser.find_element(By.ID, "mode-story").click()
    assert inside(browser, "story")["fits"] and inside(browser, "story-continue")["fits"]
