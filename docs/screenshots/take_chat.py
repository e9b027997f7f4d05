"""Screenshots of the chat page in headless Chromium with real model output, for the docs:
chat-page.png (desktop, Chat mode: a reply with a highlighted code block) and chat-phone.png
(390 px wide, Story mode).

    .venv/bin/python docs/screenshots/take_chat.py [URL]

URL defaults to a Hearth server on http://127.0.0.1:5001; when none answers there, one is
started on the bundled model for the run (and stopped after).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
DEFAULT_URL = "http://127.0.0.1:5001"

# The reply is the model's own: the page's Continue carries on this opening of a code block.
CHAT = [
    {"role": "user", "content": "Write a Python function that adds two numbers."},
    {"role": "assistant", "content": "Here is one, with a docstring:\n\n```python\ndef add("},
]
MEMORY = "A quiet tale about a lighthouse keeper on a northern island."
STORY = "The lighthouse keeper climbed the hundred steps one last time. At the top,"


def until(condition: Callable[[], object], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the page never got there"
        time.sleep(0.2)


def answers(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def start_server() -> tuple[str, subprocess.Popen[bytes]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "--skiplauncher", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    until(lambda: answers(url) or process.poll() is not None)
    assert process.poll() is None, "the server did not start"
    return url, process


def browser(width: int, height: int, phone: bool) -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
        "--disable-background-networking",
        "--disable-component-update",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    if phone:  # Chromium's window cannot be that narrow: the page is told the phone's size
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 2, "mobile": True},
        )
    return driver


def open_page(driver: WebDriver, url: str, mode: str) -> None:
    driver.get(url + "/")
    until(lambda: driver.execute_script("return document.body.dataset.ready === 'true'"))
    driver.find_element(By.ID, f"mode-{mode}").click()


def set_field(driver: WebDriver, field: str, value: str) -> None:
    element = driver.find_element(By.ID, field)
    element.clear()
    element.send_keys(value)


def finished(driver: WebDriver, button: str) -> bool:
    status = driver.find_element(By.ID, "status").text
    return bool(driver.find_element(By.ID, button).is_enabled() and "tokens/s" in status)


def desktop_chat(url: str) -> None:
    driver = browser(1100, 700, phone=False)
    try:
        open_page(driver, url, "chat")
        store = {
            "current": "c",
            "conversations": [
                {"id": "c", "title": "Adding two numbers", "updated": 3, "messages": CHAT},
            ],
        }
        driver.execute_script(
            "localStorage.setItem('hearth.chat.v2', arguments[0]);", json.dumps(store)
        )
        open_page(driver, url, "chat")
        set_field(driver, "max-tokens", "60")
        set_field(driver, "temperature", "0")
        driver.find_element(By.ID, "continue").click()
        until(lambda: finished(driver, "send"))
        driver.save_screenshot(str(OUT / "chat-page.png"))
    finally:
        driver.quit()


def phone_story(url: str) -> None:
    driver = browser(390, 844, phone=True)
    try:
        open_page(driver, url, "story")
        driver.find_element(By.CSS_SELECTOR, "#memory-box summary").click()
        set_field(driver, "memory", MEMORY)
        set_field(driver, "story", STORY)
        driver.find_element(By.ID, "settings-toggle").click()
        set_field(driver, "max-tokens", "160")
        driver.find_element(By.ID, "settings-toggle").click()
        driver.find_element(By.ID, "story-continue").click()
        until(lambda: finished(driver, "story-continue"))
        driver.save_screenshot(str(OUT / "chat-phone.png"))
    finally:
        driver.quit()


def main() -> None:
    url = sys.argv[1].rstrip("/") if len(sys.argv) > 1 else DEFAULT_URL
    process = None
    if not answers(url):
        url, process = start_server()
    try:
        desktop_chat(url)
        phone_story(url)
    finally:
        if process is not None:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
