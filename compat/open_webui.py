"""`make open-webui`: Open WebUI, as a new user runs it, against Hearth, in a real Chromium.

Open WebUI is the most used chat UI for local models, and with its default settings it sends
its built-in tools with every chat. This check installs it from the registry (open-webui
0.12.4, in a virtualenv of its own: several GB, so it is not part of `make test`), runs it
offline against Hearth serving SmolLM2-135M-Instruct over both of its connections (Ollama
and OpenAI), and drives it in headless Chromium: for each connection, with function calling
at its default and at "Legacy", one chat is sent and the reply's text on screen is sampled
four times a second. It fails unless, in every run, the reply grows on screen step by step
(streams) rather than appearing at once, and prints each run's first visible text, its
growth steps and the screenshots it took (docs/screenshots/open-webui-*.png with --shots).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.chat_page import headless_chromium  # noqa: E402
from tests.support.instruct_model import smollm2  # noqa: E402

VERSION = "0.12.4"
VENV = Path.home() / ".cache" / "hearth" / f"open-webui-{VERSION}"
HEARTH_PORT, WEBUI_PORT = 5391, 5392
PROMPT = "Write a short poem about the sea."
SAMPLE_SECONDS = 0.25
QUIET_SAMPLES = 40  # the reply is over once its text stayed the same this long (10 s)
MIN_GROWTH_STEPS = 5  # a reply that streams grows at least this often on screen
ENOUGH_STEPS = 40  # seen growing this often, it streams: the rest of the reply is not awaited


@dataclass
class Run:
    connection: str
    function_calling: str
    first_text_seconds: float | None
    growth_steps: int
    characters: int


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def install() -> Path:
    """Open WebUI's own virtualenv (made once; then reused)."""
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "open-webui").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True)
        subprocess.run([*pip, f"open-webui=={VERSION}"], check=True)
    return VENV / "bin" / "open-webui"


def wait_for(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5):
            return
        time.sleep(1)
    raise SystemExit(f"{url} did not answer within {seconds:.0f} s")


@contextlib.contextmanager
def running(command: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[None]:
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            yield
        finally:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(30)
            process.kill()


def webui_env(data: Path) -> dict[str, str]:
    """Open WebUI offline, without a login, with Hearth as both of its connections."""
    hearth = f"http://127.0.0.1:{HEARTH_PORT}"
    return {
        **os.environ,
        "DATA_DIR": str(data),
        "WEBUI_AUTH": "False",
        "WEBUI_SECRET_KEY": "hearth-check",
        "OFFLINE_MODE": "true",
        "HF_HUB_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "false",
        "BYPASS_EMBEDDING_AND_RETRIEVAL": "true",
        "ENABLE_VERSION_UPDATE_CHECK": "false",
        "OLLAMA_BASE_URL": hearth,
        "OPENAI_API_BASE_URL": f"{hearth}/v1",
        "OPENAI_API_KEY": "none",
    }


def api(driver: WebDriver, path: str, body: object | None = None) -> Any:
    """Open WebUI's own API, from the page, with the page's login."""
    return driver.execute_async_script(
        """const [path, body, done] = arguments;
        const headers = {Authorization: 'Bearer ' + localStorage.token,
                         'Content-Type': 'application/json'};
        const init = body === null ? {headers} : {method: 'POST', headers,
                                                  body: JSON.stringify(body)};
        fetch(path, init).then(r => r.json()).then(done);""",
        path,
        body,
    )


def click_button(driver: WebDriver, words: str) -> None:
    for button in driver.find_elements(By.TAG_NAME, "button"):
        with contextlib.suppress(Exception):
            if words in button.text:
                button.click()
                return


def type_prompt(driver: WebDriver) -> WebElement:
    """The prompt typed into the chat box, once the page (and the release notes it shows the
    first time, or a notice over the box) lets it be typed into."""
    for _ in range(120):
        click_button(driver, "Okay, Let")
        boxes = driver.find_elements(By.ID, "chat-input")
        if boxes:
            with contextlib.suppress(WebDriverException):
                driver.execute_script("arguments[0].focus()", boxes[0])
                boxes[0].send_keys(PROMPT)
                return boxes[0]
        time.sleep(0.5)
    raise SystemExit("Open WebUI's chat box never took the prompt")


def chat(driver: WebDriver, model: str, shot: Path | None) -> tuple[float | None, int, int]:
    """One chat with `model` in a new page: seconds to the first visible text, the times the
    reply grew on screen, and its length."""
    driver.get(f"http://127.0.0.1:{WEBUI_PORT}/?models={model}")
    box = type_prompt(driver)
    started = time.monotonic()
    box.send_keys(Keys.ENTER)
    first, steps, last, quiet = None, 0, "", 0
    while quiet < QUIET_SAMPLES or not last:
        time.sleep(SAMPLE_SECONDS)
        text = driver.execute_script(
            "const c = document.querySelectorAll('#response-content-container');"
            "return c.length ? c[c.length - 1].innerText : '';"
        )
        if text and first is None:
            first = time.monotonic() - started
        steps, quiet = (steps + 1, 0) if text != last else (steps, quiet + 1)
        last = text
        if steps >= ENOUGH_STEPS or time.monotonic() - started > 900:
            break
    if shot is not None:
        driver.save_screenshot(str(shot))
    settle()
    return first, steps, len(last)


def settle() -> None:
    """Stop what the chat left running in Hearth (the rest of a long reply, Open WebUI's title
    and follow-up tasks), so that the next chat starts on an idle server."""
    hearth = f"http://127.0.0.1:{HEARTH_PORT}"
    for _ in range(600):
        with urllib.request.urlopen(f"{hearth}/api/extra/perf", timeout=10) as answer:
            perf = json.load(answer)
        if perf["idle"] == 1 and perf["queue"] == 0:
            return
        aborting = urllib.request.Request(f"{hearth}/api/extra/abort", data=b"{}", method="POST")
        with urllib.request.urlopen(aborting, timeout=10):
            pass
        time.sleep(0.5)


def runs(shots: Path | None) -> list[Run]:
    results: list[Run] = []
    with headless_chromium(Path(tempfile.mkdtemp())) as driver:
        driver.get(f"http://127.0.0.1:{WEBUI_PORT}/")
        for _ in range(120):  # until the page has logged in (no login: WEBUI_AUTH off)
            if driver.execute_script("return localStorage.token"):
                break
            time.sleep(0.5)
        models = {m.get("owned_by"): m["id"] for m in api(driver, "/api/models")["data"]}
        for calling in ("default", "legacy"):
            api(
                driver,
                "/api/v1/users/user/settings/update",
                {"ui": {"params": {"function_calling": calling}}}
                if calling == "legacy"
                else {"ui": {}},
            )
            for connection in ("ollama", "openai"):
                shot = None if shots is None else shots / f"open-webui-{connection}-{calling}.png"
                first, steps, size = chat(driver, models[connection], shot)
                results.append(Run(connection, calling, first, steps, size))
                say(json.dumps(results[-1].__dict__))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=Path, help="where to save the screenshots")
    args = parser.parse_args()
    webui = install()
    work = Path(tempfile.mkdtemp(prefix="hearth-open-webui-"))
    hearth = [
        str(ROOT / ".venv" / "bin" / "hearth"),
        "--skiplauncher",
        "--model",
        str(smollm2()),
        "--port",
        str(HEARTH_PORT),
        "--contextsize",
        "8192",
    ]
    serve = [str(webui), "serve", "--host", "127.0.0.1", "--port", str(WEBUI_PORT)]
    with (
        running(hearth, work / "hearth.log"),
        running(serve, work / "webui.log", webui_env(work / "data")),
    ):
        wait_for(f"http://127.0.0.1:{HEARTH_PORT}/health", 300)
        wait_for(f"http://127.0.0.1:{WEBUI_PORT}/health", 600)
        results = runs(args.shots)
    say(f"logs: {work}")
    failed = [
        r for r in results if r.first_text_seconds is None or r.growth_steps < MIN_GROWTH_STEPS
    ]
    for run in failed:
        say(f"FAILED: {run.connection}/{run.function_calling} did not stream ({run})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
