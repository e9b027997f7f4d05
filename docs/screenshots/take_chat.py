"""Screenshot of the chat page in headless Chromium, mid-conversation, for the docs.

.venv/bin/python docs/screenshots/take_chat.py   (a Hearth server on 127.0.0.1:5001)
"""

from __future__ import annotations

import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

OUT = Path(__file__).resolve().parent / "chat-page.png"


def main() -> None:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1100,700",
        "--disable-background-networking",
        "--disable-component-update",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get("http://127.0.0.1:5001/")
        driver.find_element(By.ID, "clear").click()
        driver.find_element(By.ID, "system").send_keys("You tell short stories.")
        for question in ("Tell me about a lighthouse.", "What happened next?"):
            driver.find_element(By.ID, "prompt").send_keys(question)
            driver.find_element(By.ID, "send").click()
            deadline = time.monotonic() + 60
            while "tokens/s" not in driver.find_element(By.ID, "status").text:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        driver.save_screenshot(str(OUT))
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
