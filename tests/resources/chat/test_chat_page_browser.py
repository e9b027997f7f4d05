"""The chat page in a real headless Chromium against the live server on the bundled model."""

from __future__ import annotations

from pathlib import Path

import httpx
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.chat_page import assistant_text, open_page, page_ready, until
from tests.support.real_server import perf, wait_for
from tests.support.servers import RunningServer


def test_stream_stop_and_keep_the_conversation(
    browser: WebDriver, hearth: RunningServer, tmp_path: Path
) -> None:
    open_page(browser, hearth.base_url + "/")
    browser.find_element(By.ID, "clear").click()
    max_tokens = browser.find_element(By.ID, "max-tokens")
    max_tokens.clear()
    max_tokens.send_keys("400")
    browser.find_element(By.ID, "prompt").send_keys("Tell me a very long story about a ship.")
    browser.find_element(By.ID, "send").click()

    until(lambda: len(assistant_text(browser)) > 10)
    first = len(assistant_text(browser))
    until(lambda: len(assistant_text(browser)) > first + 10)  # text grows while streaming
    # The live speed: tokens after the first over the time since it came.
    until(lambda: "tok/s so far" in browser.find_element(By.ID, "speed").text)
    assert perf(hearth)["idle"] == 0
    browser.find_element(By.ID, "stop").click()
    until(lambda: browser.find_element(By.ID, "status").text == "Stopped.")
    # The server stopped generating: idle before the 400 tokens were done (a fixed second
    # here failed on a loaded machine; what matters is that the stop cut the generation).
    wait_for(lambda: perf(hearth)["idle"] == 1, timeout=60)
    assert perf(hearth)["last_token_count"] < 400
    stopped_text = assistant_text(browser)
    browser.save_screenshot(str(tmp_path / "chat.png"))

    browser.refresh()
    until(lambda: page_ready(browser))  # the mode chosen before the reload is kept
    assert browser.execute_script("return document.body.dataset.mode") == "chat"
    until(lambda: len(browser.find_elements(By.CSS_SELECTOR, ".turn")) == 2)
    assert browser.find_element(By.CSS_SELECTOR, ".turn.user").text.startswith("Tell me")
    assert assistant_text(browser) == stopped_text


def test_polling_mode_and_markup_stays_text(browser: WebDriver, hearth: RunningServer) -> None:
    open_page(browser, hearth.base_url + "/")
    browser.find_element(By.ID, "clear").click()
    browser.find_element(By.ID, "poll").click()
    max_tokens = browser.find_element(By.ID, "max-tokens")
    max_tokens.clear()
    max_tokens.send_keys("30")
    browser.find_element(By.ID, "prompt").send_keys("Write <b>bold</b> <script>x()</script>")
    browser.find_element(By.ID, "send").click()
    until(lambda: "tokens/s" in browser.find_element(By.ID, "status").text, timeout=60)
    assert assistant_text(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, ".turn b")  # shown as text, not markup
    assert "<b>bold</b>" in browser.find_element(By.CSS_SELECTOR, ".turn.user").text


def test_password_busy_server_and_regenerate(browser: WebDriver, guarded: RunningServer) -> None:
    server = guarded  # password "pw", one request at a time (tests/server/conftest.py)
    open_page(browser, server.base_url + "/")
    max_tokens = browser.find_element(By.ID, "max-tokens")
    max_tokens.clear()
    max_tokens.send_keys("12")
    # Greedy: sampled, a 12-token reply of the base model is now and then markdown that shows
    # no text (a rule, an empty code fence), which would read here as no reply.
    temperature = browser.find_element(By.ID, "temperature")
    temperature.clear()
    temperature.send_keys("0")
    browser.find_element(By.ID, "prompt").send_keys("Hello there")
    browser.find_element(By.ID, "send").click()
    until(lambda: _alert_text(browser) is not None)  # the page asks for the password once
    alert = browser.switch_to.alert
    alert.send_keys("pw")
    alert.accept()
    until(lambda: "password" in browser.find_element(By.CSS_SELECTOR, ".notice").text)
    browser.find_element(By.ID, "regenerate").click()  # the user turn is kept: try again
    until(lambda: "tokens/s" in browser.find_element(By.ID, "status").text, timeout=60)
    first_reply = assistant_text(browser)
    assert first_reply

    with (
        httpx.Client(base_url=server.base_url, timeout=60) as client,
        client.stream(
            "POST",
            "/api/extra/generate/stream",
            headers={"Authorization": "Bearer pw"},
            json={"prompt": "Occupy", "max_length": 400, "ban_eos_token": True},
        ) as busy,
    ):
        lines = busy.iter_lines()
        next(lines)
        browser.find_element(By.ID, "regenerate").click()
        until(
            lambda: any(
                "busy" in notice.text
                for notice in browser.find_elements(By.CSS_SELECTOR, ".notice")
            )
        )
        httpx.post(
            f"{server.base_url}/api/extra/abort", headers={"Authorization": "Bearer pw"}, json={}
        )
    turns = browser.find_elements(By.CSS_SELECTOR, ".turn")
    assert [t.get_attribute("class") for t in turns][:1] == ["turn user"]  # conversation kept


def _alert_text(browser: WebDriver) -> str | None:
    try:
        return str(browser.switch_to.alert.text)
    except NoAlertPresentException:
        return None
