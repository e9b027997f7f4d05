"""Images in the chat page (issue 28), in a real headless Chromium against the real server on
the bundled model with a tiny projector (`--mmproj`, tests/support/projector_gguf.py): the
Image button, paste and drop; thumbnails above the prompt and in the conversation; images
stored downscaled and shown again after a reload; sent as OpenAI `image_url` parts that the
server reads as image tokens; a 400 shown as the page's error; no button without a projector."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.chat_page import open_page, reply_done, until
from tests.support.projector_gguf import media_tokens_per_image, png_bytes
from tests.support.servers import RunningServer

PER_IMAGE = media_tokens_per_image(32, 4)
TRAY = "#attachments .attachment img"
SENT = ".turn.user .images img"


# `seeing`, the server with the projector, is shared with the vision tests
# (tests/server/conftest.py).


def picture_png(width: int, height: int) -> bytes:
    """An RGB PNG with colour gradients (not one colour: a thumbnail worth looking at)."""
    x = np.linspace(0, 255, width, dtype=np.uint8)[None, :].repeat(height, 0)
    y = np.linspace(0, 255, height, dtype=np.uint8)[:, None].repeat(width, 1)
    pixels = np.stack([x, y, 255 - x // 2], axis=2)
    rows = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, -1)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    idat = zlib.compress(rows.tobytes(), 6)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


def chat_page(browser: WebDriver, server: RunningServer) -> None:
    """The page in Chat mode, short replies, and every chat request's body kept in
    `window.sentBodies` (fetch wrapped: the request exactly as the page sent it)."""
    open_page(browser, server.base_url + "/")
    field = browser.find_element(By.ID, "max-tokens")
    field.clear()
    field.send_keys("2")
    browser.execute_script(
        """window.sentBodies = [];
        const original = window.fetch;
        window.fetch = (url, init) => {
          if (String(url).endsWith('/v1/chat/completions')) window.sentBodies.push(init.body);
          return original(url, init);
        };"""
    )


def sent_bodies(browser: WebDriver) -> list[dict[str, Any]]:
    return [json.loads(body) for body in browser.execute_script("return window.sentBodies")]


def send(browser: WebDriver, text: str) -> None:
    browser.find_element(By.ID, "prompt").send_keys(text)
    browser.find_element(By.ID, "send").click()
    until(lambda: reply_done(browser), timeout=60)
    assert not browser.find_elements(By.CSS_SELECTOR, ".notice")


def natural_sizes(browser: WebDriver, selector: str, count: int = 1) -> list[list[int]]:
    """The own size in pixels of each of the `count` images, once they are all there."""
    script = """return [...document.querySelectorAll(arguments[0])].map((image) =>
      image.complete && image.naturalWidth ? [image.naturalWidth, image.naturalHeight] : null);"""

    def loaded() -> bool:
        sizes = browser.execute_script(script, selector)
        return len(sizes) == count and None not in sizes

    until(loaded)
    return list(browser.execute_script(script, selector))


def paste(browser: WebDriver, files_js: str) -> None:
    """A paste into the prompt whose clipboard holds the files `files_js` (a JS expression for
    a Promise of File[]) makes."""
    browser.execute_async_script(
        f"""const done = arguments[arguments.length - 1];
        Promise.resolve({files_js}).then((files) => {{
          const data = new DataTransfer();
          for (const file of files) data.items.add(file);
          document.getElementById('prompt').dispatchEvent(
            new ClipboardEvent('paste', {{clipboardData: data, bubbles: true, cancelable: true}}));
          done();
        }});"""
    )


# A small PNG (or WebP) drawn by the page itself, as a File.
DRAWN = """new Promise((resolve) => {{
  const canvas = document.createElement('canvas');
  canvas.width = 120; canvas.height = 80;
  const context = canvas.getContext('2d');
  context.fillStyle = '{colour}'; context.fillRect(0, 0, 120, 80);
  canvas.toBlob((blob) => resolve(new File([blob], '{name}', {{type: '{kind}'}})), '{kind}');
}})"""


def drawn(name: str, kind: str = "image/png", colour: str = "#c33") -> str:
    return DRAWN.format(name=name, kind=kind, colour=colour)


def prompt_tokens(server: RunningServer, messages: list[dict[str, Any]]) -> int:
    body = {"messages": messages, "max_tokens": 1, "temperature": 0}
    answer = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return int(answer.json()["usage"]["prompt_tokens"])


def test_an_attached_image_is_sent_stored_small_and_shown_after_a_reload(
    browser: WebDriver, seeing: RunningServer, tmp_path: Path
) -> None:
    chat_page(browser, seeing)
    assert browser.find_element(By.ID, "attach").is_displayed()
    wide = tmp_path / "wide.png"
    wide.write_bytes(picture_png(2000, 1000))
    browser.find_element(By.ID, "attach-input").send_keys(str(wide))
    # Downscaled in the browser before anything is kept or sent: longest side 1024 px.
    assert natural_sizes(browser, TRAY) == [[1024, 512]]

    send(browser, "What is in this picture?")
    assert not browser.find_element(By.ID, "attachments").is_displayed()  # the tray is empty
    assert natural_sizes(browser, SENT) == [[1024, 512]]
    [body] = sent_bodies(browser)
    text, image = body["messages"][-1]["content"]
    assert text == {"type": "text", "text": "What is in this picture?"}
    assert image["type"] == "image_url"
    url = image["image_url"]["url"]
    assert url.startswith(("data:image/png;base64,", "data:image/jpeg;base64,"))
    # The server reads that part as the image's tokens (the page's own request, replayed).
    with_image = prompt_tokens(seeing, body["messages"])
    without = prompt_tokens(seeing, [{"role": "user", "content": "What is in this picture?"}])
    assert with_image - without >= PER_IMAGE

    # A later turn sends the earlier image again (the prompt cache knows it by its hash).
    send(browser, "And now?")
    first_turn = sent_bodies(browser)[-1]["messages"][0]["content"]
    assert first_turn[1] == {"type": "image_url", "image_url": {"url": url}}

    browser.refresh()
    until(lambda: browser.execute_script("return document.body.dataset.ready === 'true'"))
    stored = browser.execute_script("return localStorage.getItem('hearth.chat.v2')")
    assert json.loads(stored)["conversations"][0]["messages"][0]["images"] == [url]
    assert len(stored) < 200_000  # a gradient of 2000 x 1000 is 6 MB as pixels
    assert natural_sizes(browser, SENT) == [[1024, 512]]
    sent = browser.find_element(By.CSS_SELECTOR, SENT)
    assert sent.get_attribute("src") == url


def test_paste_drop_remove_convert_and_the_limit_of_eight(
    browser: WebDriver, seeing: RunningServer
) -> None:
    chat_page(browser, seeing)
    # A WebP (the server reads none) becomes PNG in the browser; a text file is refused.
    text_file = "new File(['hello'], 'notes.txt', {type: 'text/plain'})"
    paste(browser, f"Promise.all([{drawn('shot.webp', 'image/webp')}, {text_file}])")
    until(lambda: len(browser.find_elements(By.CSS_SELECTOR, TRAY)) == 1)
    until(lambda: "notes.txt: not an image" in browser.find_element(By.ID, "attach-notice").text)
    src = browser.find_element(By.CSS_SELECTOR, TRAY).get_attribute("src")
    assert src.startswith("data:image/png;base64,")
    assert natural_sizes(browser, TRAY) == [[120, 80]]

    browser.find_element(By.CSS_SELECTOR, "#attachments .remove").click()
    assert not browser.find_elements(By.CSS_SELECTOR, TRAY)
    assert not browser.find_element(By.ID, "attachments").is_displayed()

    # Dropped on the page: nine files, of which eight go with a message.
    browser.execute_async_script(
        f"""const done = arguments[arguments.length - 1];
        Promise.all(Array.from({{length: 9}}, (_, i) => {drawn("dot.png")})).then((files) => {{
          const data = new DataTransfer();
          for (const file of files) data.items.add(file);
          document.getElementById('log').dispatchEvent(
            new DragEvent('drop', {{dataTransfer: data, bubbles: true, cancelable: true}}));
          done();
        }});"""
    )
    assert len(natural_sizes(browser, TRAY, count=8)) == 8
    assert "At most 8 images" in browser.find_element(By.ID, "attach-notice").text
    browser.find_element(By.ID, "send").click()  # no text: the images alone are a message
    until(lambda: reply_done(browser), timeout=60)
    assert not browser.find_elements(By.CSS_SELECTOR, ".notice")
    content = sent_bodies(browser)[-1]["messages"][-1]["content"]
    assert [part["type"] for part in content] == ["image_url"] * 8
    assert len(browser.find_elements(By.CSS_SELECTOR, SENT)) == 8

    # Editing that message puts its images back above the prompt; Cancel takes them away.
    browser.find_element(By.CSS_SELECTOR, ".turn.user .edit").click()
    assert len(natural_sizes(browser, TRAY, count=8)) == 8
    browser.find_element(By.ID, "cancel-edit").click()
    assert not browser.find_elements(By.CSS_SELECTOR, TRAY)

    # One more: a request takes eight, so the oldest is left out, and the page says so.
    paste(browser, f"Promise.all([{drawn('last.png', colour='#33c')}])")
    until(lambda: len(browser.find_elements(By.CSS_SELECTOR, TRAY)) == 1)
    send(browser, "And this one?")
    first, _, last = sent_bodies(browser)[-1]["messages"]
    assert len(first["content"]) == 7 and len(last["content"]) == 2
    notice = browser.find_element(By.ID, "attach-notice").text
    assert notice == "A request takes at most 8 images: 1 older one was left out."


def test_a_bad_image_is_the_servers_400_shown_in_the_page(
    browser: WebDriver, seeing: RunningServer
) -> None:
    open_page(browser, seeing.base_url + "/", mode=None)
    # Valid base64 of a PNG cut short: the page keeps it, the server refuses it.
    cut = base64.b64encode(png_bytes(16, 16, (10, 200, 10))[:-30]).decode()
    truncated = "data:image/png;base64," + cut
    conversation = {
        "id": "bad",
        "title": "Broken picture",
        "updated": 1,
        "messages": [{"role": "user", "content": "Look", "images": [truncated]}],
    }
    browser.execute_script(
        "localStorage.setItem('hearth.chat.v2', arguments[0]);",
        json.dumps({"current": "bad", "conversations": [conversation]}),
    )
    open_page(browser, seeing.base_url + "/")
    assert len(browser.find_elements(By.CSS_SELECTOR, SENT)) == 1
    browser.find_element(By.ID, "regenerate").click()
    until(lambda: browser.find_elements(By.CSS_SELECTOR, ".notice"))
    message = browser.find_element(By.CSS_SELECTOR, ".notice").text
    assert message.startswith("The server answered 400.") and "image" in message


def test_without_a_projector_there_is_no_image_button_and_a_paste_is_refused(
    browser: WebDriver, hearth: RunningServer
) -> None:
    chat_page(browser, hearth)
    assert not browser.find_element(By.ID, "attach").is_displayed()
    paste(browser, f"Promise.all([{drawn('shot.png')}])")
    until(lambda: "does not take images" in browser.find_element(By.ID, "attach-notice").text)
    assert not browser.find_elements(By.CSS_SELECTOR, "#attachments .attachment")


def test_full_storage_is_said_and_the_conversation_kept_in_the_page(
    browser: WebDriver, seeing: RunningServer
) -> None:
    chat_page(browser, seeing)
    # Another page of this origin took all of the storage that was left.
    browser.execute_script(
        """let size = 1 << 20;
        localStorage.setItem('filler', '');
        while (size >= 1) {
          try { localStorage.setItem('filler', localStorage.getItem('filler') + 'x'.repeat(size)); }
          catch (_) { size >>= 1; }
        }"""
    )
    assert not browser.find_element(By.ID, "storage-note").is_displayed()
    paste(browser, f"Promise.all([{drawn('shot.png')}])")
    until(lambda: len(browser.find_elements(By.CSS_SELECTOR, TRAY)) == 1)
    send(browser, "Kept?")
    assert browser.find_element(By.ID, "storage-note").is_displayed()
    assert "storage for the page is full" in browser.find_element(By.ID, "storage-note").text
    assert len(browser.find_elements(By.CSS_SELECTOR, SENT)) == 1
    assert len(browser.find_elements(By.CSS_SELECTOR, ".turn.assistant")) == 1

    browser.execute_script("localStorage.removeItem('filler')")
    send(browser, "And now?")  # room again: saved, and the note goes
    assert not browser.find_element(By.ID, "storage-note").is_displayed()
    stored = json.loads(browser.execute_script("return localStorage.getItem('hearth.chat.v2')"))
    assert len(stored["conversations"][-1]["messages"]) == 4
