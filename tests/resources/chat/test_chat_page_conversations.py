"""The chat page's conversations in a real headless Chromium against the live server: the list,
new/rename/delete, export and import, the old single conversation migrated, and branching."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

# The page helpers; the headless Chromium fixture `browser` is in tests/server/conftest.py.
from tests.support.chat_page import (
    open_page,
    page_ready,
    reply_done,
    until,
)
from tests.support.servers import RunningServer


def stored(browser: WebDriver) -> dict[str, Any]:
    return dict(browser.execute_script("return JSON.parse(localStorage.getItem('hearth.chat.v2'))"))


def titles(browser: WebDriver) -> list[str]:
    return [
        str(item.text)
        for item in browser.find_elements(By.CSS_SELECTOR, "#conversations li .title")
    ]


def current_title(browser: WebDriver) -> str:
    return str(
        browser.find_element(By.CSS_SELECTOR, "#conversations li[aria-current='true'] .title").text
    )


def item(browser: WebDriver, title: str) -> Any:
    for entry in browser.find_elements(By.CSS_SELECTOR, "#conversations li"):
        if entry.find_element(By.CSS_SELECTOR, ".title").text == title:
            return entry
    raise AssertionError(f"no conversation {title!r} in {titles(browser)}")


def test_the_old_single_conversation_is_migrated(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    open_page(browser, hearth.base_url + "/", mode=None)
    old = [{"role": "user", "content": "Old question"}, {"role": "assistant", "content": "Old"}]
    browser.execute_script(
        "localStorage.clear(); localStorage.setItem('hearth.chat.v1', arguments[0]);",
        json.dumps(old),
    )
    open_page(browser, hearth.base_url + "/")
    assert titles(browser) == ["Old question"]
    assert [t.text for t in browser.find_elements(By.CSS_SELECTOR, ".turn .body")] == [
        "Old question",
        "Old",
    ]
    assert browser.execute_script("return localStorage.getItem('hearth.chat.v1')") is None
    assert stored(browser)["conversations"][0]["messages"] == old


def test_new_rename_delete_and_kept_across_reloads(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    open_page(browser, hearth.base_url + "/")
    max_tokens = browser.find_element(By.ID, "max-tokens")
    max_tokens.clear()
    max_tokens.send_keys("4")
    for question in ("First topic", "Second topic"):
        browser.find_element(By.ID, "clear").click()
        browser.find_element(By.ID, "prompt").send_keys(question)
        browser.find_element(By.ID, "send").click()
        until(lambda: reply_done(browser), timeout=60)
    assert titles(browser) == ["Second topic", "First topic"]  # newest first, named by its start
    assert current_title(browser) == "Second topic"

    item(browser, "First topic").find_element(By.CSS_SELECTOR, ".title").click()
    assert current_title(browser) == "First topic"
    assert browser.find_element(By.CSS_SELECTOR, ".turn.user .body").text == "First topic"

    item(browser, "First topic").find_element(By.CSS_SELECTOR, ".rename").click()
    field = browser.find_element(By.CSS_SELECTOR, "#conversations li input")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys("Renamed", Keys.ENTER)
    until(lambda: "Renamed" in titles(browser))

    browser.refresh()
    until(lambda: page_ready(browser))
    assert sorted(titles(browser)) == ["Renamed", "Second topic"]
    assert current_title(browser) == "Renamed"  # the open conversation is kept too
    assert browser.find_element(By.CSS_SELECTOR, ".turn.user .body").text == "First topic"

    item(browser, "Renamed").find_element(By.CSS_SELECTOR, ".delete").click()
    alert = browser.switch_to.alert
    assert "Renamed" in alert.text
    alert.accept()
    until(lambda: titles(browser) == ["Second topic"])
    assert current_title(browser) == "Second topic"
    assert browser.find_element(By.CSS_SELECTOR, ".turn.user .body").text == "Second topic"
    browser.refresh()
    until(lambda: page_ready(browser))
    assert titles(browser) == ["Second topic"]


def test_export_then_import_and_bad_files_are_refused(
    browser: WebDriver,
    hearth: RunningServer,
    tmp_path: Path,
) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    # The tab's own browsing context (tests/server/conftest.py's `browser`) downloads there.
    tab = browser.execute_cdp_cmd("Target.getTargetInfo", {})["targetInfo"]
    browser.execute_cdp_cmd(
        "Browser.setDownloadBehavior",
        {
            "behavior": "allow",
            "downloadPath": str(downloads),
            "browserContextId": tab["browserContextId"],
        },
    )
    open_page(browser, hearth.base_url + "/", mode=None)
    conversations = [
        {
            "id": "a",
            "title": "Alpha",
            "updated": 2,
            "messages": [
                {"role": "user", "content": "A?"},
                {"role": "assistant", "content": "**A**"},
            ],
        },
        {
            "id": "b",
            "title": "Beta",
            "updated": 1,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "B?"},
            ],
        },
    ]
    browser.execute_script(
        "localStorage.setItem('hearth.chat.v2', arguments[0]);",
        json.dumps({"current": "a", "conversations": conversations}),
    )
    open_page(browser, hearth.base_url + "/")
    browser.find_element(By.ID, "export").click()
    until(lambda: [p for p in downloads.glob("*.json")], timeout=10)
    exported = next(downloads.glob("hearth-chats-*.json"))
    data = json.loads(exported.read_text(encoding="utf-8"))
    assert data["format"] == "hearth-chats"
    assert [(c["title"], c["messages"]) for c in data["conversations"]] == [
        (c["title"], c["messages"]) for c in conversations
    ]

    # A fresh browser profile: import brings both back beside the empty conversation.
    browser.execute_script("localStorage.removeItem('hearth.chat.v2');")
    open_page(browser, hearth.base_url + "/")
    assert titles(browser) == ["New chat"]
    importer = browser.find_element(By.ID, "import")
    importer.send_keys(str(exported))
    until(lambda: "Imported 2 conversations" in browser.find_element(By.ID, "side-notice").text)
    assert sorted(titles(browser)) == ["Alpha", "Beta", "New chat"]
    assert browser.find_element(By.CSS_SELECTOR, ".turn.assistant strong").text == "A"

    bad = {
        "not-json.json": ("{oops", "not JSON"),
        "other.json": (json.dumps({"messages": []}), "Not a Hearth chat export"),
        "damaged.json": (
            json.dumps(
                {
                    "format": "hearth-chats",
                    "conversations": [
                        {"title": "ok", "messages": []},
                        {"title": "x", "messages": [{"role": "wizard", "content": "hi"}]},
                    ],
                }
            ),
            "Conversation 2 is damaged",
        ),
    }
    for name, (text, message) in bad.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        browser.find_element(By.ID, "import").send_keys(str(path))
        until(lambda m=message: m in browser.find_element(By.ID, "side-notice").text)
    assert sorted(titles(browser)) == ["Alpha", "Beta", "New chat"]  # nothing half-imported


def test_editing_an_earlier_turn_makes_a_branch(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    open_page(browser, hearth.base_url + "/", mode=None)
    original = [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "Green."},
    ]
    browser.execute_script(
        "localStorage.setItem('hearth.chat.v2', arguments[0]);",
        json.dumps(
            {
                "current": "o",
                "conversations": [
                    {"id": "o", "title": "Colours", "updated": 1, "messages": original}
                ],
            }
        ),
    )
    open_page(browser, hearth.base_url + "/")
    assert "branch" in browser.find_element(By.CSS_SELECTOR, "#sidebar .hint").text
    max_tokens = browser.find_element(By.ID, "max-tokens")
    max_tokens.clear()
    max_tokens.send_keys("6")
    browser.find_elements(By.CSS_SELECTOR, ".turn.user .edit")[0].click()
    prompt = browser.find_element(By.ID, "prompt")
    assert prompt.get_attribute("value") == "Name a colour."
    assert browser.find_element(By.ID, "editing").is_displayed()
    prompt.clear()
    prompt.send_keys("Name a fruit.")
    browser.find_element(By.ID, "send").click()
    until(lambda: reply_done(browser), timeout=60)

    assert current_title(browser) == "Colours (branch)"
    turns = browser.find_elements(By.CSS_SELECTOR, ".turn")
    assert [t.get_attribute("class") for t in turns] == ["turn user", "turn assistant"]
    assert turns[0].find_element(By.CSS_SELECTOR, ".body").text == "Name a fruit."
    assert not browser.find_element(By.ID, "editing").is_displayed()
    by_title = {c["title"]: c["messages"] for c in stored(browser)["conversations"]}
    assert by_title["Colours"] == original  # the original is untouched
    branch = by_title["Colours (branch)"]
    assert [m["role"] for m in branch] == ["user", "assistant"]
    assert branch[0]["content"] == "Name a fruit." and branch[1]["content"]
