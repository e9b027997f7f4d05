"""The chat page while the server reads a long conversation: "reading the conversation: N %"
where the reply will be (llama-server's `return_progress`), then the reply in its place. A
scripted engine reads the prompt slowly, in chunks, so the wait is there to be seen."""

from __future__ import annotations

import re
from collections.abc import Callable

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.chat_page import assistant_text, open_page, reply_done, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
READING = re.compile(r"^reading the conversation: (\d+) %$")


def test_the_page_shows_how_far_the_conversation_is_read(
    browser: WebDriver, serve_engine: Serve
) -> None:
    engine = ScriptedEngine(end_after=4, prompt_chunk=8, prompt_seconds=0.25)
    server = serve_engine(engine)
    open_page(browser, server.base_url + "/")
    browser.find_element(By.ID, "prompt").send_keys("Tell me about the sea, please.")
    browser.find_element(By.ID, "send").click()
    shown: list[str] = []

    def watch() -> bool:
        text = assistant_text(browser)
        if not shown or shown[-1] != text:
            shown.append(text)
        return reply_done(browser)

    until(watch, timeout=60)
    shown.append(assistant_text(browser))  # the reply may have ended between two looks
    assert engine.requests[-1].report_progress  # the page asked for the reports
    reading = [int(match[1]) for text in shown if (match := READING.match(text))]
    assert len(reading) >= 2, shown  # more than one step of the prompt was seen
    assert reading == sorted(reading) and all(0 <= percent <= 100 for percent in reading)
    assert shown[-1] == "Hello, world!"  # the reply took its place
    assert not browser.find_elements(By.CSS_SELECTOR, ".turn.assistant .reading")
