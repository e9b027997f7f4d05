"""Issue 12 in the launcher: the model folder fields (Quick Launch), the Admin tab, and the
running view's current model and model-loading state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLineEdit
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.run_view import RunView
from server.settings.config import HearthSettings
from tests.app.launching import launched_settings


def test_folder_and_admin_fields_round_trip_through_a_kcpps(
    window: MainWindow, tmp_path: Path
) -> None:
    models, configs = tmp_path / "models", tmp_path / "configs"
    models.mkdir()
    configs.mkdir()
    loaded = tmp_path / "loaded.kcpps"
    loaded.write_text(
        json.dumps(
            {
                "modeldir": str(models),
                "maxloadedmodels": 3,
                "defaultmodel": "gemma-3-270m",
                "admin": True,
                "admindir": str(configs),
                "adminpassword": "secret",
            }
        )
    )
    assert window.load_file(loaded)
    quick, admin = window.quick, window.admin
    assert quick.model_dir.text() == str(models)
    assert (quick.max_loaded.value(), quick.default_model.text()) == (3, "gemma-3-270m")
    assert admin.admin.isChecked() and admin.admin_dir.text() == str(configs)
    assert admin.admin_password.text() == "secret"
    assert admin.admin_password.echoMode() == QLineEdit.EchoMode.Password

    # What the fields show now is what the next file gets.
    quick.max_loaded.setValue(2)
    quick.default_model.setText("")
    admin.admin_dir.setText("")
    admin.admin_password.setText("other")
    saved = window.save_file(tmp_path / "saved.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    assert data["modeldir"] == str(models) and data["maxloadedmodels"] == 2
    assert data["defaultmodel"] is None and data["admindir"] is None
    assert data["admin"] is True and data["adminpassword"] == "other"

    # And back: a file written by the launcher loads into the same fields.
    window.show_settings(HearthSettings())
    assert quick.model_dir.text() == "" and not admin.admin.isChecked()
    assert window.load_file(saved)
    assert (quick.model_dir.text(), quick.max_loaded.value()) == (str(models), 2)
    assert admin.admin.isChecked() and admin.admin_password.text() == "other"


def test_max_loaded_models_follows_the_folder_field(window: MainWindow, tmp_path: Path) -> None:
    quick = window.quick
    bounds = (quick.max_loaded.minimum(), quick.max_loaded.maximum())
    assert bounds == HearthSettings.bounds("maxloadedmodels")
    assert not quick.max_loaded.isEnabled() and not quick.default_model.isEnabled()
    quick.model_dir.setText(str(tmp_path))
    assert quick.max_loaded.isEnabled() and quick.default_model.isEnabled()
    quick.model_dir.setText("  ")
    assert not quick.max_loaded.isEnabled()
    assert "/v1/models" in quick.model_dir.toolTip()
    assert "/api/admin/list_options" in quick.model_dir.toolTip()


def test_admin_fields_follow_the_admin_box(window: MainWindow) -> None:
    admin = window.admin
    assert window.tabs.tabText(window.tabs.indexOf(admin)) == "Admin"
    assert not admin.admin_dir.isEnabled() and not admin.admin_password.isEnabled()
    admin.admin.setChecked(True)
    assert admin.admin_dir.isEnabled() and admin.admin_password.isEnabled()
    assert admin.admin_dir.placeholderText() == "same as the model folder"
    assert "/api/admin/reload_config" in admin.admin.toolTip()


def test_a_missing_folder_is_refused_beside_its_field(window: MainWindow, tmp_path: Path) -> None:
    window.quick.model_dir.setText(str(tmp_path / "nowhere"))
    assert window.read_settings() is None
    assert window.quick.error_text("modeldir") == "No such folder."
    assert not window.launch()
    window.quick.model_dir.setText(str(tmp_path))
    window.admin.admin.setChecked(True)
    window.admin.admin_dir.setText(str(tmp_path / "nowhere"))
    assert window.read_settings() is None
    assert window.admin.error_text("admindir") == "No such folder."
    # Outside admin mode the admin folder is only kept, not used: no reason to refuse it.
    window.admin.admin.setChecked(False)
    settings = window.read_settings()
    assert settings is not None and settings.admindir == str(tmp_path / "nowhere")


def test_the_running_view_shows_the_model_and_its_loading(qtbot: QtBot) -> None:
    view = RunView()
    qtbot.addWidget(view)
    view.show_perf(
        {
            "queue": 2,
            "idle": 1,
            "model": "gemma-3-270m",
            "loaded_models": ["gemma-3-270m"],
            "loading_model": "qwen3-0.6b",
        }
    )
    assert view.state.text() == "Loading model qwen3-0.6b… (2 waiting)"
    assert view.model.text() == "Model: gemma-3-270m"
    view.show_perf(
        {
            "queue": 0,
            "idle": 0,
            "model": "qwen3-0.6b",
            "loaded_models": ["gemma-3-270m", "qwen3-0.6b"],
            "loading_model": None,
        }
    )
    assert view.state.text() == "Generating"
    assert view.model.text() == "Model: qwen3-0.6b (also loaded: gemma-3-270m)"
    view.show_perf({"queue": 1, "idle": 1, "model": None, "loading_model": "qwen3-0.6b"})
    assert view.model.text() == "Model: none loaded"
    assert view.state.text() == "Loading model qwen3-0.6b… (1 waiting)"


def test_an_older_servers_perf_still_shows(qtbot: QtBot) -> None:
    view = RunView()
    qtbot.addWidget(view)
    view.show_perf({"queue": 1, "idle": 0})
    assert view.state.text() == "Generating, 1 waiting"
    assert view.model.text() == "Model: -"
    view.show_perf({})
    assert view.state.text() == "Idle"


def test_embeddings_model_field_round_trips_and_reaches_the_server(
    window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = tmp_path / "nomic-embed.gguf"
    loaded = tmp_path / "loaded.kcpps"
    loaded.write_text(json.dumps({"embeddingsmodel": str(embedder)}))
    assert window.load_file(loaded)
    assert window.quick.embeddings_model.text() == str(embedder)
    settings = window.read_settings()
    assert settings is not None and settings.embeddingsmodel == str(embedder)

    served = launched_settings(window, monkeypatch)
    assert served.embeddingsmodel == str(embedder)

    window.quick.embeddings_model.setText("")
    saved = window.save_file(tmp_path / "saved.kcpps")
    assert saved is not None and not json.loads(saved.read_text()).get("embeddingsmodel")
