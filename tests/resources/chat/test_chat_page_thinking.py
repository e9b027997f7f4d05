"""The chat page with a thinking model: the thought streams live into a folded block above the
answer, stays with the conversation, and a Think toggle (shown only for a model whose template
thinks) turns thinking off and on. A scripted engine writes `<think>…</think>` slowly."""

from __future__ import annotations

import json
from collections.abc import Callable

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from server.core.templates.chat import ChatTemplate
from tests.server.dialects.test_thinking_scripted import ANSWER, PIECES, PLAIN, THINKING, THOUGHT
from tests.support.chat_page import open_page, reply_done, until
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]


def thought_state(browser: WebDriver) -> dict[str, object] | None:
    """The last reply's thought block: its text, summary, whether it is open, and whether it
    comes before the answer."""
    state = browser.execute_script(
        """
        const turns = document.querySelectorAll(".turn.assistant");
        const turn = turns[turns.length - 1];
        const block = turn && turn.querySelector("details.thought");
        if (!block) return null;
        return {text: block.querySelector(".thought-body").textContent,
                summary: block.querySelector("summary").textContent, open: block.open,
                above: block.nextElementSibling === turn.querySelector(".body"),
                answer: turn.querySelector(".body").textContent.trim()};
        """
    )
    return dict(state) if state else None


def send(browser: WebDriver, text: str) -> None:
    browser.find_element(By.ID, "prompt").send_keys(text)
    browser.find_element(By.ID, "send").click()


def test_the_thought_streams_folded_above_the_answer(
    browser: WebDriver, serve_engine: Serve
) -> None:
    template = ChatTemplate(THINKING, "qwen2", eos_token="</s>")
    engine = ScriptedEngine(
        pieces=PIECES, end_after=len(PIECES), token_seconds=0.15, chat_template=template
    )
    server = serve_engine(engine)
    open_page(browser, server.base_url + "/")
    assert browser.find_element(By.ID, "think-toggle").is_displayed()
    send(browser, "Hi")
    seen: list[dict[str, object]] = []

    def watch() -> bool:
        state = thought_state(browser)
        if state is not None and (not seen or seen[-1] != state):
            seen.append(state)
        return reply_done(browser)

    until(watch, timeout=60)
    live = [state for state in seen if state["summary"] == "Thinking…"]
    assert len({str(state["text"]) for state in live}) >= 2, seen  # it grew while shown
    assert all(not state["open"] and state["above"] for state in seen)  # folded, above
    final = thought_state(browser)
    assert final is not None
    assert (final["text"], final["summary"], final["answer"]) == (THOUGHT, "Thought", ANSWER)
    assert "<think>" not in str(final["answer"])

    # The thought is kept with the conversation, and goes back with it.
    stored = json.loads(browser.execute_script("return localStorage['hearth.chat.v2']"))
    reply = stored["conversations"][0]["messages"][-1]
    assert reply == {"role": "assistant", "content": ANSWER, "reasoning": THOUGHT}
    browser.refresh()
    until(lambda: thought_state(browser) is not None)
    assert thought_state(browser) == {**final}
    thinking_on = engine.requests[-1]  # Think on: as the server and template have it
    assert thinking_on.reasoning_budget is None and not thinking_on.prompt.endswith("</think>\n\n")

    browser.find_element(By.ID, "think").click()  # Think off
    send(browser, "Again")
    until(lambda: reply_done(browser) and len(engine.requests) == 2, timeout=60)
    asked = engine.requests[-1]
    assert asked.reasoning_budget == 0 and asked.prompt.endswith("<think>\n\n</think>\n\n")
    assert f"<think>{THOUGHT}</think>{ANSWER}" in asked.prompt  # the earlier thought, given back


def test_no_think_toggle_for_a_model_that_does_not_think(
    browser: WebDriver, serve_engine: Serve
) -> None:
    engine = ScriptedEngine(chat_template=ChatTemplate(PLAIN, "qwen2", eos_token="</s>"))
    server = serve_engine(engine)
    open_page(browser, server.base_url + "/")
    assert not browser.find_element(By.ID, "think-toggle").is_displayed()
    send(browser, "Hi")
    until(lambda: reply_done(browser), timeout=60)
    assert thought_state(browser) is None  # no thought, no block
    sent = engine.requests[-1]
    assert sent.reasoning_budget is None
