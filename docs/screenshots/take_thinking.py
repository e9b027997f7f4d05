"""A screenshot of the chat page with a thinking model's thought, for the docs:
chat-thinking.png.

    .venv/bin/python docs/screenshots/take_thinking.py

No thinking model ships with Hearth, so the tests' instruct model (SmolLM2-135M-Instruct, from
tests/support/instruct_model.py) stands in, with a ChatML template that opens a thought the way
Qwen3's and DeepSeek-R1's do and a thinking budget: the model's own words fill the thought, the
server closes it after 40 tokens, and the model answers. The thought block is opened for the
picture (the page folds it once the answer begins).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from selenium.webdriver.common.by import By

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from docs.screenshots.take_chat import (
    OUT,
    ROOT,
    answers,
    browser,
    finished,
    open_page,
    set_field,
    until,
)
from tests.support.instruct_model import smollm2

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)
QUESTION = "Why is the sky blue? Think it over first."


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        template = Path(scratch) / "thinking-chatml.jinja"
        template.write_text(TEMPLATE)
        port = "5077"
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "server",
                "--skiplauncher",
                "--port",
                port,
                "--model",
                str(smollm2()),
                "--chat-template-file",
                str(template),
                "--reasoning-budget",
                "40",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            until(lambda: answers(url) or process.poll() is not None)
            driver = browser(1100, 700, phone=False)
            try:
                open_page(driver, url, "chat")
                set_field(driver, "max-tokens", "64")
                set_field(driver, "temperature", "0")
                set_field(driver, "prompt", QUESTION)
                driver.find_element(By.ID, "send").click()
                until(lambda: finished(driver, "send"))
                for block in driver.find_elements(By.CSS_SELECTOR, "details.thought"):
                    driver.execute_script("arguments[0].open = true;", block)
                driver.save_screenshot(str(OUT / "chat-thinking.png"))
            finally:
                driver.quit()
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
