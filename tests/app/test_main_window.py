"""The launcher window, offscreen: settings round-trips, .kcpps rules, and a real launch."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from PySide6.QtWidgets import QCheckBox
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from server.process.serve import wants_launcher
from server.settings.cli import parse_command_line
from server.settings.config import HearthSettings
from tests.support.servers import ROOT, free_port

FIXTURES = ROOT / "tests" / "fixtures"


def write_kcpps(folder: Path, name: str, **values: object) -> Path:
    path = folder / name
    path.write_text(json.dumps(values))
    return path


def test_each_tab_round_trips_settings(qtbot: QtBot) -> None:
    settings = HearthSettings(
        host="0.0.0.0",
        port_param=5123,
        multiuser=4,
        parallelrequests=3,
        password="pw",
        quiet=True,
        contextsize=8192,
        threads=2,
        gpulayers=0,
        defaultgenamt=300,
        batchsize=256,
        nofastforward=True,
        noshift=True,
        jinja=True,
        jinja_tools=True,
        launch=True,
    )
    window = MainWindow(settings)
    qtbot.addWidget(window)
    assert window.read_settings() == settings
    window.network.port.setValue(5200)
    window.context.context_size.setValue(4096)
    changed = window.read_settings()
    assert changed is not None
    assert (changed.port_param, changed.contextsize) == (5200, 4096)
    assert window.quick.context_size.value() == 4096  # shown on two tabs, kept equal


@pytest.mark.parametrize(("stored", "shown"), [(0, 10), (1, 10), (5, 5), (None, 10)])
def test_loaded_multiuser_below_2_shows_as_10(
    window: MainWindow, tmp_path: Path, stored: int | None, shown: int
) -> None:
    values = {"port_param": 5005} if stored is None else {"multiuser": stored}
    assert window.load_file(write_kcpps(tmp_path, "x.kcpps", parallelrequests=0, **values))
    assert window.network.multiuser.value() == shown
    assert window.network.parallel.value() == 1
    saved = window.save_file(tmp_path / "saved")
    assert saved is not None and saved.name == "saved.kcpps"
    assert json.loads(saved.read_text())["multiuser"] == shown


def test_unknown_keys_survive_load_and_save(window: MainWindow, tmp_path: Path) -> None:
    original = json.loads((FIXTURES / "koboldcpp-saved.kcpps").read_text())
    assert window.load_file(FIXTURES / "koboldcpp-saved.kcpps")
    saved = window.save_file(tmp_path / "round.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    for key in ("chatcompletionsadapter", "ropeconfig", "gendefaults", "usecuda", "sdmodel"):
        assert data[key] == original[key], key


def test_malformed_file_leaves_the_form_unchanged(window: MainWindow, tmp_path: Path) -> None:
    window.network.port.setValue(5321)
    before = window.read_settings()
    broken = tmp_path / "broken.kcpps"
    broken.write_text("{ this is not json")
    assert not window.load_file(broken)
    assert window.read_settings() == before
    assert "not valid JSON" in window.notice.text() and str(broken) in window.notice.text()


def test_invalid_value_is_shown_beside_its_field(window: MainWindow) -> None:
    window.quick.model_path.setText("/nowhere/model.gguf")
    assert window.read_settings() is None
    assert window.quick.error_text("model_param") == "No such file."
    assert not window.launch()


def test_use_jinja_is_implied_not_a_box_and_its_key_is_kept(
    window: MainWindow, tmp_path: Path
) -> None:
    """Hearth always uses the model's own template: no box pretends to switch it, and a
    KoboldCpp file's `jinja` key survives a load and save."""
    labels = [box.text() for form in window._forms() for box in form.findChildren(QCheckBox)]
    assert "Use Jinja" not in labels and "Jinja for Tools" in labels
    for value in (True, False):
        assert window.load_file(write_kcpps(tmp_path, f"j{value}.kcpps", jinja=value))
        saved = window.save_file(tmp_path / f"saved{value}")
        assert saved is not None and json.loads(saved.read_text())["jinja"] is value


def test_presets_menu_loads_the_shipped_presets(window: MainWindow) -> None:
    names = [action.text() for action in window.presets_menu.actions()]
    assert {"Bundled model", "Lan shared", "Parallel 4"} <= set(names)
    lan = next(a for a in window.presets_menu.actions() if a.text() == "Lan shared")
    lan.trigger()
    assert window.network.host.text() == "0.0.0.0" and window.network.password.text()


def test_port_in_use_is_reported_and_nothing_starts(window: MainWindow) -> None:
    with socket.socket() as occupant:
        occupant.bind(("127.0.0.1", 0))
        occupant.listen()
        window.network.port.setValue(occupant.getsockname()[1])
        assert not window.launch()
    assert "already in use" in window.notice.text()
    assert not window.server.running


@pytest.mark.model  # launches the real server
def test_launch_runs_a_real_server_shows_log_and_queue_and_stops(qtbot: QtBot) -> None:
    window = MainWindow(HearthSettings(port_param=free_port(), contextsize=2048))
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.server_ready, timeout=120_000):
        assert window.launch()
    assert window.tabs.currentWidget() is window.run_view
    assert not window.launch_button.isEnabled()
    qtbot.waitUntil(
        lambda: any("Hearth is serving" in line for line in window.run_view.log.text_lines()),
        timeout=10_000,
    )
    assert any(
        "Loading gemma-3-270m-q4_k_m.gguf: 100%" in line
        for line in window.run_view.log.text_lines()
    )

    base = f"http://127.0.0.1:{window.settings.port_param}"
    request = threading.Thread(
        target=lambda: httpx.post(
            f"{base}/api/v1/generate",
            timeout=60,
            json={"prompt": "A story:", "max_length": 150, "ban_eos_token": True},
        )
    )
    request.start()
    qtbot.waitUntil(lambda: window.run_view.state.text().startswith("Generating"), timeout=20_000)
    # The generation's speed is plotted while it runs (waited for before it ends: on a busy
    # machine the first live poll may come late).
    qtbot.waitUntil(lambda: bool(window.run_view.plot.points), timeout=20_000)
    request.join()
    qtbot.waitUntil(lambda: window.run_view.state.text() == "Idle", timeout=10_000)
    assert window.run_view.total.text() == "1"
    # where the model runs, as the server said it (this machine: on the CPU)
    assert window.run_view.placement.text().startswith("Runs on: CPU (")

    with qtbot.waitSignal(window.server_ready, timeout=120_000):
        window.run_view.restart_button.click()
    assert window.server.running and window.run_view.state.text() in ("Idle", "Generating")

    with qtbot.waitSignal(window.server.exited, timeout=20_000) as stopped:
        window.run_view.stop_button.click()
    assert stopped.args[1] == "stopped"
    assert window.launch_button.isEnabled()


@pytest.mark.model  # launches the real server
def test_killed_server_is_reported(qtbot: QtBot) -> None:
    window = MainWindow(HearthSettings(port_param=free_port(), contextsize=2048))
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.server_ready, timeout=120_000):
        window.launch()
    with qtbot.waitSignal(window.server.exited, timeout=20_000) as exited:
        os.kill(window.server.process_id(), signal.SIGKILL)
    assert exited.args[1] == "crashed or was killed"
    assert "crashed or was killed" in window.notice.text()
    assert "exit code" in window.run_view.state.text()
    assert window.launch_button.isEnabled()


def test_launcher_rule_of_the_command_line() -> None:
    assert wants_launcher(parse_command_line([]))
    assert not wants_launcher(parse_command_line(["model.gguf"]))
    assert not wants_launcher(
        parse_command_line(["--config", str(FIXTURES / "koboldcpp-saved.kcpps")])
    )
    assert wants_launcher(parse_command_line(["model.gguf", "--showgui"]))
    assert not wants_launcher(parse_command_line(["--skiplauncher"]))


def test_without_a_display_hearth_says_how_to_run_headless() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    result = subprocess.run(
        [sys.executable, "-m", "server"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--skiplauncher" in result.stderr and "Traceback" not in result.stderr


def test_settings_and_recent_files_are_remembered_between_runs(
    qtbot: QtBot, tmp_path: Path
) -> None:
    from app.settings_store import load_preferences

    first = MainWindow(HearthSettings(), load_preferences())
    qtbot.addWidget(first)
    saved = first.save_file(tmp_path / "mine.kcpps")
    first.network.port.setValue(5432)
    first.close()
    second = MainWindow(None, load_preferences())
    qtbot.addWidget(second)
    assert second.network.port.value() == 5432
    assert str(saved) in [action.text() for action in second.presets_menu.actions()]
