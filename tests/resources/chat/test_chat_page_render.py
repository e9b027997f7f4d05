"""The chat page's markdown rendering, its safety against hostile model output, its SSE reader
and its static files, in a real headless Chromium against the live server on the bundled model."""

from __future__ import annotations

import json
from typing import Any

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

# The page helpers; the headless Chromium fixture `browser` is in tests/server/conftest.py.
from tests.support.chat_page import (
    open_page,
    page_ready,
    reply_done,
    until,
)
from tests.support.servers import RunningServer

# Model-like text that tries everything: raw HTML outside and inside code fences, an image
# that runs script when it fails to load, a javascript: link, a remote image, and an iframe.
HOSTILE = """Here is **bold** text and a list:

- first
- second

```python
def add(a, b):
    return a + b  # <script>window.__pwned = "fence"</script>
```

<img src=x onerror="window.__pwned = 'img'">

<script>window.__pwned = "script"</script>

[click me](javascript:window.__pwned='link') and [a site](https://example.com/page)
![remote](http://203.0.113.9/pixel.png) inline <img src=y onerror="window.__pwned = 'inline'">

<iframe src="http://203.0.113.9/"></iframe>

Text with <a href="javascript:window.__pwned='raw'">raw link</a> inline.
"""


def seed(browser: WebDriver, url: str, conversation: list[dict[str, str]]) -> None:
    """Open the page in Chat mode with `conversation` stored as the current one (as if it had
    been written before), reloaded so that the page renders it the way it renders any."""
    open_page(browser, url)
    store = {
        "current": "c1",
        "conversations": [{"id": "c1", "title": "Seeded", "updated": 1, "messages": conversation}],
    }
    browser.execute_script(
        "localStorage.setItem('hearth.chat.v2', arguments[0]);", json.dumps(store)
    )
    browser.refresh()
    until(lambda: page_ready(browser))


def nothing_ran(browser: WebDriver) -> None:
    assert browser.execute_script("return window.__pwned") is None
    dangerous = browser.execute_script(
        """return [...document.querySelectorAll('#log *')].filter((e) =>
             ['SCRIPT', 'IMG', 'IFRAME'].includes(e.tagName) || e.hasAttribute('onerror')
             || (e.getAttribute('href') || '').toLowerCase().startsWith('javascript:')
           ).map((e) => e.outerHTML);"""
    )
    assert dangerous == []


def test_model_markdown_renders_and_hostile_markup_stays_inert(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    seed(
        browser,
        hearth.base_url + "/",
        [{"role": "user", "content": "Show me"}, {"role": "assistant", "content": HOSTILE}],
    )
    reply = browser.find_element(By.CSS_SELECTOR, ".turn.assistant")
    # Normal markdown renders...
    assert reply.find_element(By.TAG_NAME, "strong").text == "bold"
    assert [li.text for li in reply.find_elements(By.CSS_SELECTOR, "ul > li")] == [
        "first",
        "second",
    ]
    code = reply.find_element(By.CSS_SELECTOR, "pre > code.language-python.hljs")
    assert code.find_elements(By.CSS_SELECTOR, "span.hljs-keyword")  # highlighted
    assert "<script>" in code.text  # the fence's markup is shown as code, as written
    copy = reply.find_element(By.CSS_SELECTOR, "pre > button.copy")
    assert copy.text == "Copy"
    safe = reply.find_element(By.PARTIAL_LINK_TEXT, "a site")
    assert safe.get_attribute("href") == "https://example.com/page"
    assert safe.get_attribute("target") == "_blank"
    assert "noopener" in str(safe.get_attribute("rel"))
    # ...and nothing hostile ran or exists: raw HTML is shown as text, images as their alt text.
    nothing_ran(browser)
    assert "<img src=x" in reply.text and "[image: remote]" in reply.text
    assert not reply.find_elements(By.CSS_SELECTOR, "a[href^='javascript' i], iframe, img")

    # The renderer on its own, fed the hostile text with the HTML unescaped by markdown rules
    # (inside a list item and a blockquote, where marked passes HTML through).
    browser.execute_script(
        "document.getElementById('log').appendChild(window.hearthRender(arguments[0]));",
        "> <img src=x onerror=window.__pwned=1>\n\n- <svg onload=window.__pwned=2>\n\n"
        + "<details open ontoggle=window.__pwned=3>x</details>\n\n"
        + '<a href="jAvAsCrIpT:window.__pwned=4">y</a>',
    )
    nothing_ran(browser)
    found = "#log [onerror], #log [onload], #log [ontoggle], #log svg, #log details, #log img"
    assert browser.execute_script(f"return document.querySelectorAll('{found}').length") == 0


def test_the_page_forbids_remote_content_and_inline_script(hearth: RunningServer) -> None:
    """The Content-Security-Policy is the second wall: scripts from Hearth only, no remote
    images or frames, requests to Hearth only."""
    page = httpx.get(hearth.base_url + "/")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "img-src 'self' data:" in policy and "connect-src 'self'" in policy
    assert "<script>" not in page.text  # no inline script: all of it is in chat.js


def test_static_files_are_served_only_from_the_chat_folder(hearth: RunningServer) -> None:
    with httpx.Client(base_url=hearth.base_url) as client:
        own = client.get("/chat-files/chat.js")
        assert own.status_code == 200
        assert own.headers["content-type"] == "text/javascript; charset=utf-8"
        assert own.headers["cache-control"] == "no-cache"
        assert own.headers["x-content-type-options"] == "nosniff"
        assert client.get("/chat-files/chat.css").headers["content-type"].startswith("text/css")
        vendored = client.get("/chat-files/vendor/marked/marked.umd.js")
        assert vendored.status_code == 200 and "max-age" in vendored.headers["cache-control"]
        licence = client.get("/chat-files/vendor/dompurify/LICENSE")
        assert licence.headers["content-type"].startswith("text/plain")
        assert client.head("/chat-files/chat.js").status_code == 200
        for outside in (
            "/chat-files/%2e%2e/%2e%2e/pyproject.toml",
            "/chat-files/..%2f..%2fpyproject.toml",
            "/chat-files/vendor/..%2f..%2f..%2fserver%2fapp.py",
            "/chat-files/%2fetc%2fpasswd",
            "/chat-files/vendor",
            "/chat-files/",
            "/chat-files/missing.js",
        ):
            assert client.get(outside).status_code == 404, outside
        # The dialects' routes are untouched by the page's own.
        assert client.get("/chat/completions").status_code == 405


def test_sse_reader_splits_events_wherever_the_bytes_break(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    """The page's one SSE reader: events {id, event, data} from a body cut at any byte, with
    CRLF and CR line ends, comments, multi-line data, ids that carry over, and a last event
    without its blank line (dropped, as EventSource does)."""
    open_page(browser, hearth.base_url + "/", mode=None)
    stream = (
        ': ping\r\n\r\nid: 1\r\nevent: message\r\ndata: {"token": "é"}\r\n\r\n'
        "data: one\ndata: two\n\nid: 7\revent: error\rdata: x\r\rdata: tail-without-end\n"
    )
    events: list[dict[str, Any]] = browser.execute_async_script(
        """const [text, done] = [arguments[0], arguments[arguments.length - 1]];
           const bytes = new TextEncoder().encode(text);
           const body = new ReadableStream({start(controller) {
             // One byte at a time: every line and UTF-8 character is split somewhere.
             for (const b of bytes) controller.enqueue(new Uint8Array([b]));
             controller.close();
           }});
           (async () => {
             const out = [];
             for await (const e of sseEvents(new Response(body))) out.push(e);
             done(out);
           })();""",
        stream,
    )
    # `at`: when each event was complete (performance.now()), in order.
    times = [event.pop("at") for event in events]
    assert times == sorted(times)
    assert events == [
        {"id": "1", "event": "message", "data": '{"token": "é"}'},
        {"id": "1", "event": "message", "data": "one\ntwo"},
        {"id": "7", "event": "error", "data": "x"},
    ]


def test_continue_carries_on_the_last_reply_and_renders_the_model_s_code(
    browser: WebDriver,
    hearth: RunningServer,
) -> None:
    """Continue asks for more of the last reply (a trailing assistant message is continued)
    and appends it to the same turn; the real model's streamed text is rendered as markdown:
    here, inside the code fence the reply had opened."""
    start = "Here is the function:\n\n```python\ndef add(a, b):\n"
    seed(
        browser,
        hearth.base_url + "/",
        [
            {"role": "user", "content": "Write add in Python."},
            {"role": "assistant", "content": start},
        ],
    )
    for field, value in (("max-tokens", "24"), ("temperature", "0")):
        browser.find_element(By.ID, field).clear()
        browser.find_element(By.ID, field).send_keys(value)
    browser.find_element(By.ID, "continue").click()
    until(lambda: reply_done(browser), timeout=90)
    stored = browser.execute_script(
        "return JSON.parse(localStorage.getItem('hearth.chat.v2')).conversations[0].messages"
    )
    assert [m["role"] for m in stored] == ["user", "assistant"]  # no new turn
    assert stored[1]["content"].startswith(start) and len(stored[1]["content"]) > len(start)
    turns = browser.find_elements(By.CSS_SELECTOR, ".turn.assistant")
    assert len(turns) == 1
    code = turns[0].find_element(By.CSS_SELECTOR, "pre > code.language-python.hljs")
    continued = stored[1]["content"][len(start) :].split("```")[0].strip()
    assert continued and code.text.startswith("def add(a, b):")
    assert continued.splitlines()[0].strip() in code.text  # the model's own text, as code
    assert turns[0].find_element(By.CSS_SELECTOR, "pre > button.copy")
    # The usage at the end: the context used, against the server's context size.
    context = browser.find_element(By.ID, "context").text
    assert context.startswith("Context ") and context.endswith(" / 4096")
    nothing_ran(browser)
