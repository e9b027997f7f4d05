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
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.main_window import MainWindow  # noqa: E402
from server.config import HearthSettings  # noqa: E402

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

    from server.model_file import resolve_model_path
    from tests.hub_server import HubRepo, LocalHub

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
    for index, name in enumerate(["quick-launch", "network", "context", "admin"]):
        window.tabs.setCurrentIndex(index)
        wait(300)
        window.grab().save(str(OUT / f"launcher-{name}.png"))
    # The running view's figures need a quick device: lavapipe (a software GPU) is not one.
    gpu.backend.setCurrentIndex(max(gpu.backend.findData("auto"), 0))
    hub_screenshots(window)
    window.launch()
    wait_until(lambda: window.run_view.state.text() == "Idle")
    base = f"http://127.0.0.1:{window.settings.port_param}"
    for length in (60, 80, 200):
        threading.Thread(
            target=lambda n=length: httpx.post(
                f"{base}/api/v1/generate",
                timeout=60,
                json={"prompt": "Once upon a time", "max_length": n},
            )
        ).start()
    # Mid-run, after two replies: the queue, the figures and the plot all have something.
    wait_until(lambda: window.run_view.total.text() == "2")
    wait(300)
    window.grab().save(str(OUT / "launcher-running.png"))
    wait_until(lambda: window.run_view.total.text() == "3")
    window.server.stop()
    wait_until(lambda: not window.server.running, 20_000)
    window.close()
    application.quit()


if __name__ == "__main__":
    main()
