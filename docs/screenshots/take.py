"""Screenshots of the launcher as a user sees it, for the docs and README.

    xvfb-run -a -s "-screen 0 1024x768x24" .venv/bin/python docs/screenshots/take.py

Uses Qt's real xcb platform on the virtual screen, launches a real server on the bundled model
for the running view, and writes one PNG per tab next to this file.
"""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QProgressBar  # noqa: E402

from app.main_window import MainWindow  # noqa: E402
from server.settings.config import HearthSettings  # noqa: E402

OUT = Path(__file__).resolve().parent


def wait(milliseconds: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(milliseconds, loop.quit)
    loop.exec()


def wait_until(condition: object, timeout_ms: int = 120_000) -> None:
    waited = 0
    while not condition() and waited < timeout_ms:  # type: ignore[operator]
        wait(100)
        waited += 100


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def hub_screenshots(window: MainWindow) -> None:
    """Search Hugging Face against the tests' local stand-in for the Hub (no internet here),
    with a slow network so the download's progress can be seen."""
    import tempfile

    from huggingface_hub import constants

    from server.models.files import resolve_model_path
    from tests.support.hub_server import HubRepo, LocalHub

    model = resolve_model_path(None)
    hub = LocalHub(seconds_per_chunk=0.05)
    hub.add(
        HubRepo(
            "unsloth/gemma-3-270m-it-GGUF",
            {"gemma-3-270m-it-Q4_K_M.gguf": model, "gemma-3-270m-it-Q8_0.gguf": model},
            downloads=182_311,
            likes=95,
        )
    )
    hub.add(
        HubRepo(
            "ggml-org/gemma-3-270m-GGUF",
            {"gemma-3-270m-Q8_0.gguf": model},
            downloads=40_518,
            likes=31,
        )
    )
    hub.start()
    constants.ENDPOINT = hub.url
    constants.HUGGINGFACE_CO_URL_TEMPLATE = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    constants.HF_HUB_CACHE = tempfile.mkdtemp()
    window.tabs.setCurrentIndex(0)
    window.quick.open_hub_search()
    dialog = window.quick.hub_dialog
    assert dialog is not None
    dialog.query.setText("gemma 3 270m")
    dialog.search()
    wait_until(lambda: dialog.repo_table.rowCount() == 2, 20_000)
    dialog.repo_table.selectRow(0)
    wait_until(lambda: dialog.file_table.rowCount() == 2, 20_000)
    dialog.file_table.selectRow(0)
    wait(300)
    dialog.grab().save(str(OUT / "hub-search.png"))
    dialog.download()
    wait_until(lambda: dialog.progress.value() > 350, 60_000)
    dialog.grab().save(str(OUT / "hub-download.png"))
    hub.seconds_per_chunk = 0.0
    wait_until(lambda: not dialog.isVisible(), 60_000)
    wait(300)
    window.grab().save(str(OUT / "launcher-downloaded-model.png"))
    window.quick.model_path.setText("")
    window.quick.model_path.editingFinished.emit()
    hub.stop()


def send(url: str, body: dict[str, object]) -> None:
    """A streamed request read to its end on its own thread, as a client would."""

    def read() -> None:
        with httpx.stream("POST", url, json=body, timeout=300) as response:
            for _ in response.iter_lines():
                pass

    threading.Thread(target=read, daemon=True).start()


def rows(window: MainWindow) -> list[tuple[str, str]]:
    """(dialect, state) of each row of the running view's request table."""
    table = window.run_view.requests
    return [
        (table.item(r, 2).text(), table.item(r, 3).text())
        for r in range(table.rowCount())
        if table.item(r, 2) and table.item(r, 3)
    ]


def running_screenshot(window: MainWindow) -> None:
    """A generation running: the live plot has points, one request generates, one reads a long
    prompt (its progress bar part filled), one waits; each in another dialect."""
    base = f"http://127.0.0.1:{window.settings.port_param}"
    story = {"prompt": "Once upon a time", "max_length": 400, "ban_eos_token": True}
    send(f"{base}/api/extra/generate/stream", story)
    chat = [{"role": "user", "content": "Name three rivers."}]
    send(f"{base}/v1/chat/completions", {"messages": chat, "max_tokens": 40, "stream": True})
    plot = window.run_view.plot
    wait_until(lambda: len(plot.points) >= 12)
    log = " ".join(f"Line {i}: the server answered a request." for i in range(120))
    long_prompt = {"model": "gemma3", "prompt": log + " Summary:", "options": {"num_predict": 30}}
    send(f"{base}/api/generate", long_prompt)  # Ollama's: waits for the chat's slot
    wait_until(
        lambda: ("ollama", "waiting") in rows(window) or ("ollama", "prompt") in rows(window)
    )
    message = {"model": "claude", "max_tokens": 30, "messages": chat, "stream": True}
    send(f"{base}/v1/messages", message)  # Anthropic's: waits behind it
    table = window.run_view.requests

    def reading_halfway() -> bool:
        for index in range(table.rowCount()):
            bar = table.cellWidget(index, 4)
            if isinstance(bar, QProgressBar) and 0.3 < bar.value() / max(bar.maximum(), 1) < 0.8:
                return len(rows(window)) == 3
        return False

    wait_until(reading_halfway)
    wait(200)
    window.grab().save(str(OUT / "launcher-running.png"))
    wait_until(lambda: table.rowCount() == 0)


def main() -> None:
    application = QApplication(sys.argv[:1])
    window = MainWindow(HearthSettings(port_param=free_port(), contextsize=4096))
    window.show()
    gpu = window.quick.gpu
    if gpu.has_gpu:  # the Backend list as a user sees it, once the device probe answered
        wait_until(lambda: bool(gpu.devices), 60_000)
        first_vulkan = gpu.backend.findData("vulkan:0")
        if first_vulkan >= 0:
            gpu.backend.setCurrentIndex(first_vulkan)
    for index, name in enumerate(["quick-launch", "network", "context", "loaded-files", "admin"]):
        window.tabs.setCurrentIndex(index)
        wait(300)
        window.grab().save(str(OUT / f"launcher-{name}.png"))
    # The running view's figures need a quick device: lavapipe (a software GPU) is not one.
    gpu.backend.setCurrentIndex(max(gpu.backend.findData("auto"), 0))
    hub_screenshots(window)
    # Two parallel slots, so the running view shows batched requests, one reading a long
    # prompt and one waiting (set after the Network tab's screenshot, which keeps its look).
    window.network.parallel.setValue(2)
    window.launch()
    wait_until(lambda: window.run_view.state.text() == "Idle")
    running_screenshot(window)
    window.server.stop()
    wait_until(lambda: not window.server.running, 20_000)
    window.close()
    application.quit()


if __name__ == "__main__":
    main()
