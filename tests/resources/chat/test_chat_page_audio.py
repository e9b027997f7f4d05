"""Sounds in the chat page (issue 28), in a real headless Chromium: for a model whose projector
takes audio (`/props` `modalities`), the attach button takes WAV and MP3 files, shown as a chip
with the file name above the prompt and in the conversation, sent as OpenAI `input_audio` parts
that the server decodes; a small sound is stored with the conversation, a large one only while
the page is open (the stored conversation keeps its name, and the page says why it is no longer
sent). A scripted engine that claims the modalities stands in for the model: the page's part of
the wire is what is tested here; tests/server/dialects/test_audio_real.py reads the same parts
with a real audio projector."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.audio_projector_gguf import tone_wav
from tests.support.chat_page import open_page, reply_done, until
from tests.support.media_bytes import mp3_bytes, png_bytes
from tests.support.scripted_engine import ScriptedEngine
from tests.support.servers import RunningServer

Serve = Callable[..., RunningServer]
STORE = "hearth.chat.v2"
TRAY_SOUNDS = "#attachments .attachment .sound"
SENT_SOUNDS = ".turn.user .images .sound"
SHORT = tone_wav(440, 0.5)  # 16 KB: stored with the conversation
LONG = tone_wav(220, 10.0)  # 320 KB: over the 256 KB the page stores


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def hearing_page(
    browser: WebDriver, serve_engine: Serve, modalities: frozenset[str] = frozenset({"audio"})
) -> ScriptedEngine:
    """The page on a scripted model with `modalities`, in Chat mode, its requests recorded
    (record_requests). The engine records what the server made of each request."""
    engine = ScriptedEngine(modalities=modalities)
    server = serve_engine(engine)
    open_page(browser, server.base_url + "/")
    record_requests(browser)
    return engine


def record_requests(browser: WebDriver) -> None:
    """Every chat request's body kept in `window.sentBodies` (fetch wrapped: the request
    exactly as the page sent it), until the page is loaded again."""
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


def chips(browser: WebDriver, selector: str) -> list[str]:
    return [chip.text for chip in browser.find_elements(By.CSS_SELECTOR, selector)]


def attach(browser: WebDriver, path: Path) -> None:
    browser.find_element(By.ID, "attach-input").send_keys(str(path))
    until(lambda: f"♪ {path.name}" in chips(browser, TRAY_SOUNDS))


def drop(browser: WebDriver, *files: tuple[str, bytes, str]) -> None:
    """Files (name, bytes, type) dropped on the conversation."""
    browser.execute_script(
        """const data = new DataTransfer();
        for (const [name, encoded, type] of arguments[0]) {
          const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
          data.items.add(new File([bytes], name, {type}));
        }
        document.getElementById('log').dispatchEvent(
          new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true}));""",
        [[name, b64(data), kind] for name, data, kind in files],
    )


def stored_messages(browser: WebDriver) -> list[dict[str, Any]]:
    store = json.loads(browser.execute_script(f"return localStorage.getItem('{STORE}')"))
    current = next(c for c in store["conversations"] if c["id"] == store["current"])
    return list(current["messages"])


def reload(browser: WebDriver) -> None:
    browser.refresh()
    until(lambda: browser.execute_script("return document.body.dataset.ready === 'true'"))
    record_requests(browser)


def notice(browser: WebDriver) -> str:
    return str(browser.find_element(By.ID, "attach-notice").text)


def test_a_sound_is_a_chip_sent_as_input_audio_and_stored_when_small(
    browser: WebDriver, serve_engine: Serve, tmp_path: Path
) -> None:
    engine = hearing_page(browser, serve_engine)
    button = browser.find_element(By.ID, "attach")
    assert button.is_displayed() and button.text == "Sound"
    assert ".wav" in browser.find_element(By.ID, "attach-input").get_attribute("accept")
    drop(browser, ("dot.png", png_bytes(4, 4), "image/png"))  # a model that only hears
    until(lambda: "does not take images" in notice(browser))
    assert not browser.find_elements(By.CSS_SELECTOR, "#attachments .attachment")
    clip = tmp_path / "a4.wav"
    clip.write_bytes(SHORT)
    attach(browser, clip)

    send(browser, "What is this sound?")
    assert not browser.find_element(By.ID, "attachments").is_displayed()  # the tray is empty
    assert chips(browser, SENT_SOUNDS) == ["♪ a4.wav"]
    text, sound = sent_bodies(browser)[-1]["messages"][-1]["content"]
    assert text == {"type": "text", "text": "What is this sound?"}
    assert sound == {"type": "input_audio", "input_audio": {"data": b64(SHORT), "format": "wav"}}
    [heard] = engine.requests[-1].media  # what the server decoded from the page's part
    assert (heard.kind, heard.mime, heard.data) == ("audio", "audio/wav", SHORT)

    # A later turn sends the sound again; a reload shows it from the stored conversation.
    send(browser, "And now?")
    assert sent_bodies(browser)[-1]["messages"][0]["content"][1] == sound
    reload(browser)
    stored = stored_messages(browser)[0]
    assert stored["audio"] == [{"name": "a4.wav", "format": "wav", "data": b64(SHORT)}]
    assert chips(browser, SENT_SOUNDS) == ["♪ a4.wav"]


def test_a_large_sound_goes_while_the_page_is_open_and_is_not_stored(
    browser: WebDriver, serve_engine: Serve, tmp_path: Path
) -> None:
    engine = hearing_page(browser, serve_engine)
    clip = tmp_path / "long.wav"
    clip.write_bytes(LONG)
    attach(browser, clip)
    send(browser, "Listen")
    assert engine.requests[-1].media[0].data == LONG
    # Stored without its data, so the conversation does not fill the browser's storage.
    assert stored_messages(browser)[0]["audio"] == [
        {"name": "long.wav", "format": "wav", "kept": False}
    ]
    assert len(browser.execute_script(f"return localStorage.getItem('{STORE}')")) < 20_000
    send(browser, "Again")  # still held by the page: sent again
    assert engine.requests[-1].media[0].data == LONG

    reload(browser)
    assert chips(browser, SENT_SOUNDS) == ["♪ long.wav (not kept)"]
    send(browser, "And after a reload?")
    first_turn = sent_bodies(browser)[-1]["messages"][0]
    assert first_turn == {"role": "user", "content": "Listen"}  # the words, not the sound
    assert engine.requests[-1].media == ()
    assert notice(browser) == (
        "1 sound was too large to store and no longer held by the page: left out."
    )
    # Editing that message cannot put back what the page no longer holds, and says so.
    browser.find_element(By.CSS_SELECTOR, ".turn.user .edit").click()
    assert not browser.find_elements(By.CSS_SELECTOR, TRAY_SOUNDS)
    assert "not attached again" in notice(browser)


def test_each_file_goes_where_the_model_takes_it(browser: WebDriver, serve_engine: Serve) -> None:
    engine = hearing_page(browser, serve_engine, frozenset({"vision", "audio"}))
    assert browser.find_element(By.ID, "attach").text == "Attach"
    # An image, an MP3 and a text file called a sound: two attached, one named as refused.
    drop(
        browser,
        ("dot.png", png_bytes(4, 4), "image/png"),
        ("beep.mp3", mp3_bytes(id3=True), "audio/mpeg"),
        ("fake.wav", b"this is text, not a sound", "audio/wav"),
    )
    until(lambda: "fake.wav: not a sound" in notice(browser))
    until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#attachments .attachment")) == 2)
    assert chips(browser, TRAY_SOUNDS) == ["♪ beep.mp3"]
    browser.find_element(By.ID, "send").click()  # no text: the attachments alone are a message
    until(lambda: reply_done(browser), timeout=60)
    parts = sent_bodies(browser)[-1]["messages"][-1]["content"]
    assert [part["type"] for part in parts] == ["image_url", "input_audio"]
    assert parts[1]["input_audio"] == {"data": b64(mp3_bytes(id3=True)), "format": "mp3"}
    assert [item.kind for item in engine.requests[-1].media] == ["image", "audio"]

    # A model that only sees: the button is for images, and a sound is refused.
    hearing_page(browser, serve_engine, frozenset({"vision"}))
    assert browser.find_element(By.ID, "attach").text == "Image"
    assert ".wav" not in browser.find_element(By.ID, "attach-input").get_attribute("accept")
    drop(browser, ("a4.wav", SHORT, "audio/wav"))
    until(lambda: "does not take sounds" in notice(browser))
    assert not browser.find_elements(By.CSS_SELECTOR, "#attachments .attachment")
