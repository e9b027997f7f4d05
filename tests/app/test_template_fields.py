"""The launcher's chat template and thinking fields, KoboldCpp's: Jinja Template beside the
model files, and on the Context tab Jinja Thinking, Think Effort, Jinja Kwargs, Reasoning Format
and Reasoning Budget. Bound to their settings, kept in .kcpps files as KoboldCpp writes them,
handed to the launched server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.main_window import MainWindow
from app.tabs import settings_table
from server.settings.config import HearthSettings
from tests.app.launching import launched_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONTEXT_KEYS = ("jinja_tools", "jinjathink", "reasoningeffort", "jinja_kwargs")
REASONING_KEYS = ("reasoning_format", "reasoning_budget")


def test_the_fields_sit_where_koboldcpp_has_them_and_show_the_defaults(
    window: MainWindow,
) -> None:
    quick = [key for key in window.quick.read() if key in ("embeddingsmodel", "jinjatemplate")]
    assert quick == ["embeddingsmodel", "jinjatemplate"]  # with the model files
    context = window.context
    rows = [key for key in context.read() if key in CONTEXT_KEYS + REASONING_KEYS]
    assert rows == [*CONTEXT_KEYS, *REASONING_KEYS]
    assert window.quick.jinja_template.text() == "" and context.jinja_kwargs.text() == ""
    assert context.jinja_think.currentText() == "default"
    choices = [context.jinja_think.itemText(i) for i in range(context.jinja_think.count())]
    assert choices == ["default", "true", "false"]  # the settings model's values, in order
    efforts = [context.think_effort.itemText(i) for i in range(context.think_effort.count())]
    assert efforts[:5] == ["default", "none", "minimal", "low", "medium"]
    assert context.reasoning_format.currentText() == "auto"
    assert context.reasoning_budget.value() == -1
    assert context.reasoning_budget.text() == "No limit"
    assert "enable_thinking" in settings_table.JINJA_THINK.tooltip()


def test_edited_fields_reach_the_settings_and_the_launched_server(
    window: MainWindow, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    template = tmp_path / "mine.jinja"
    template.write_text("{{ messages[0].content }}")
    window.quick.jinja_template.setText(str(template))
    context = window.context
    context.jinja_think.setCurrentText("false")
    context.think_effort.setCurrentText("high")
    context.jinja_kwargs.setText('{"greeting": "hi"}')
    context.reasoning_format.setCurrentText("none")
    context.reasoning_budget.setValue(512)
    expected = {
        "jinjatemplate": str(template),
        "jinjathink": "false",
        "reasoningeffort": "high",
        "jinja_kwargs": '{"greeting": "hi"}',
        "reasoning_format": "none",
        "reasoning_budget": 512,
    }
    settings = window.read_settings()
    assert settings is not None
    assert {key: getattr(settings, key) for key in expected} == expected
    served = launched_settings(window, monkeypatch)
    assert {key: getattr(served, key) for key in expected} == expected
    assert served.template_kwargs == {
        "greeting": "hi",
        "enable_thinking": False,
        "reasoning_effort": "high",
    }
    window.quick.jinja_template.clear()
    settings = window.read_settings()
    assert settings is not None and settings.jinjatemplate is None  # empty: the model's own


def test_kwargs_that_are_not_a_json_object_are_shown_beside_the_field(
    window: MainWindow,
) -> None:
    window.context.jinja_kwargs.setText("enable_thinking: false")
    assert window.read_settings() is None
    assert "not valid JSON" in window.context.error_text("jinja_kwargs")


def test_the_fields_round_trip_through_a_koboldcpp_file(window: MainWindow, tmp_path: Path) -> None:
    original = json.loads((FIXTURES / "koboldcpp-saved.kcpps").read_text())
    written = {
        **original,
        "jinjatemplate": "/models/qwen3.jinja",
        "jinjathink": "false",
        "jinja_kwargs": '{"enable_thinking": false}',
        "reasoningeffort": "low",
    }
    loaded = tmp_path / "koboldcpp.kcpps"
    loaded.write_text(json.dumps(written))
    assert window.load_file(loaded)
    assert window.quick.jinja_template.text() == "/models/qwen3.jinja"
    assert window.context.jinja_think.currentText() == "false"
    assert window.context.think_effort.currentText() == "low"
    saved = window.save_file(tmp_path / "saved.kcpps")
    assert saved is not None
    data = json.loads(saved.read_text())
    for key in ("jinjatemplate", "jinjathink", "jinja_kwargs", "reasoningeffort"):
        assert data[key] == written[key], key
    assert data["chatcompletionsadapter"] == original["chatcompletionsadapter"]
    # A file without the keys (KoboldCpp before them) loads as the defaults.
    assert window.load_file(FIXTURES / "koboldcpp-saved.kcpps")
    assert window.context.jinja_think.currentText() == "default"
    assert window.quick.jinja_template.text() == ""
    settings = window.read_settings()
    assert settings is not None and settings.template_kwargs == {}
    assert HearthSettings.model_fields["jinjathink"].default == "default"
