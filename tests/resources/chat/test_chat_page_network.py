"""The chat page on a bad network, in headless Chromium against the real model: a connection
cut mid-reply (through a proxy the test controls) is resumed by the page itself, and a proxy
that delivers streams in one lump is noticed, said once, and answered by switching to polling.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.chat_page import (
    assistant_text,
    open_page,
    reply_done,
    until,
)
from tests.support.proxies import BufferingProxy, CuttingProxy, in_front_of
from tests.support.servers import RunningServer
from tests.support.sse import iter_sse
from tests.support.story_page import set_field, story, story_done

LUMPED = "in one piece"


@pytest.fixture
def cutting_proxy(hearth: RunningServer) -> Iterator[CuttingProxy]:
    with in_front_of(hearth, CuttingProxy) as proxy:
        yield proxy


@pytest.fixture
def buffering_proxy(hearth: RunningServer) -> Iterator[BufferingProxy]:
    with in_front_of(hearth, BufferingProxy) as proxy:
        yield proxy


def new_chat(browser: WebDriver, url: str) -> None:
    open_page(browser, url + "/")
    browser.find_element(By.ID, "clear").click()


def ask(browser: WebDriver, prompt: str, max_tokens: int) -> None:
    field = browser.find_element(By.ID, "max-tokens")
    field.clear()
    field.send_keys(str(max_tokens))
    browser.find_element(By.ID, "prompt").send_keys(prompt)
    browser.find_element(By.ID, "send").click()


def stored_reply(browser: WebDriver) -> str:
    store: dict[str, Any] = browser.execute_script(
        "return JSON.parse(localStorage.getItem('hearth.chat.v2'))"
    )
    current = next(c for c in store["conversations"] if c["id"] == store["current"])
    last = current["messages"][-1]
    assert last["role"] == "assistant"
    return str(last["content"])


def whole_stream_text(hearth: RunningServer, name: str) -> str:
    """The reply as the server streamed it, every event from the first (fetched directly), in
    OpenAI's chunks or KoboldAI's tokens."""
    text = ""
    with httpx.stream("GET", f"{hearth.base_url}/api/extra/stream/{name}", timeout=60) as r:
        assert r.status_code == 200
        for event in iter_sse(r):
            if not event.data or event.data == "[DONE]":
                continue
            data = event.json()
            if "token" in data:
                text += data["token"]
                continue
            choices = data.get("choices") or [{}]
            text += (choices[0].get("delta") or {}).get("content") or ""
    return text


def notices(browser: WebDriver) -> list[str]:
    """What the page says: the chat log's notices and the note above both modes."""
    note = browser.find_element(By.ID, "network-note")
    said = [str(n.text) for n in browser.find_elements(By.CSS_SELECTOR, ".notice")]
    return said + ([str(note.text)] if note.is_displayed() else [])


def test_the_page_resumes_a_reply_after_the_connection_drops(
    browser: WebDriver, hearth: RunningServer, cutting_proxy: CuttingProxy
) -> None:
    new_chat(browser, cutting_proxy.base_url)
    ask(browser, "Tell me a very long story about a ship.", 150)
    until(lambda: len(assistant_text(browser)) > 20, timeout=60)
    connections_before = cutting_proxy.connections
    cutting_proxy.cut()  # mid-reply: the page's stream breaks
    shown_at_cut = len(assistant_text(browser))
    until(lambda: reply_done(browser), timeout=180)

    assert cutting_proxy.connections > connections_before  # it came back for the rest
    assert len(assistant_text(browser)) > shown_at_cut  # and the reply went on
    name = browser.find_elements(By.CSS_SELECTOR, ".turn.assistant")[-1].get_attribute(
        "data-stream"
    )
    assert name and name.startswith("chatcmpl-")
    # Nothing lost, nothing twice: what the page kept is exactly what the server streamed.
    assert stored_reply(browser) == whole_stream_text(hearth, name)
    assert not any("cannot be reached" in text for text in notices(browser))


def test_a_proxy_that_holds_streams_back_switches_the_page_to_polling(
    browser: WebDriver, hearth: RunningServer, buffering_proxy: BufferingProxy
) -> None:
    # Straight to Hearth, a stream is a stream: no notice, still streaming.
    new_chat(browser, hearth.base_url)
    ask(browser, "Tell me a very long story about a ship.", 60)
    until(lambda: reply_done(browser), timeout=120)
    assert not any(LUMPED in text for text in notices(browser))
    assert not browser.find_element(By.ID, "poll").is_selected()

    # Through a proxy that delivers each response only when it is complete.
    new_chat(browser, buffering_proxy.base_url)
    ask(browser, "Tell me a very long story about a ship.", 60)
    until(lambda: reply_done(browser), timeout=120)
    assert assistant_text(browser)
    weighed = browser.execute_script("return document.body.dataset.lastStream")
    assert [text for text in notices(browser) if LUMPED in text] != [], weighed
    assert browser.find_element(By.ID, "poll").is_selected()

    # The next reply polls (its text grows through /api/extra/generate/check), said once.
    ask(browser, "And then?", 30)
    until(lambda: reply_done(browser), timeout=120)
    assert len([text for text in notices(browser) if LUMPED in text]) == 1
    browser.refresh()  # the switch is remembered
    until(lambda: browser.execute_script("return document.body.dataset.ready") == "true")
    assert browser.find_element(By.ID, "poll").is_selected()


def test_a_story_continues_after_the_connection_drops(
    browser: WebDriver, hearth: RunningServer, cutting_proxy: CuttingProxy
) -> None:
    open_page(browser, cutting_proxy.base_url + "/", mode="story")
    set_field(browser, "max-tokens", "120")
    beginning = "Chapter one. The storm began at midnight, and"
    set_field(browser, "story", beginning)
    browser.find_element(By.ID, "story-continue").click()
    until(lambda: len(story(browser)) > len(beginning) + 20, timeout=60)
    connections_before = cutting_proxy.connections
    cutting_proxy.cut()
    until(lambda: story_done(browser), timeout=180)
    assert cutting_proxy.connections > connections_before
    name = browser.find_element(By.ID, "story").get_attribute("data-stream")
    assert name and name.startswith("story-")  # the page's genkey names the stream
    assert story(browser) == beginning + whole_stream_text(hearth, name)


def test_story_mode_polls_behind_a_proxy_that_holds_streams_back(
    browser: WebDriver, buffering_proxy: BufferingProxy
) -> None:
    open_page(browser, buffering_proxy.base_url + "/", mode="story")
    set_field(browser, "max-tokens", "60")
    set_field(browser, "story", "Chapter one. The storm began at midnight, and")
    browser.find_element(By.ID, "story-continue").click()
    until(lambda: story_done(browser), timeout=120)
    weighed = browser.execute_script("return document.body.dataset.lastStream")
    assert browser.find_element(By.ID, "poll").is_selected(), weighed
    assert [text for text in notices(browser) if LUMPED in text] != []  # said in Story too
    written = story(browser)
    browser.execute_script("document.getElementById('status').textContent = '';")
    browser.find_element(By.ID, "story-continue").click()  # now whole, read by polling
    until(lambda: story_done(browser), timeout=120)
    assert len(story(browser)) > len(written)
