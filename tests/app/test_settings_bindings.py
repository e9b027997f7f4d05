"""The launcher's binding table: each setting written once, its range and tooltip taken from the
settings model, and every tab loading and reading exactly the settings of its rows."""

from __future__ import annotations

from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.tabs import settings_table
from app.tabs.bindings import Binding, Number
from server.settings.config import HearthSettings

BINDINGS = [value for value in vars(settings_table).values() if isinstance(value, Binding)]


def test_the_table_binds_each_setting_once() -> None:
    keys = [binding.key for binding in BINDINGS]
    assert len(keys) == len(set(keys))
    with pytest.raises(ValueError, match="not a setting"):
        Number("no_such_setting", "Nothing:")


@pytest.mark.parametrize("binding", BINDINGS, ids=lambda binding: binding.key)
def test_a_tooltip_is_the_model_description_unless_the_launcher_says_its_own(
    binding: Binding[Any],
) -> None:
    description = HearthSettings.model_fields[binding.key].description or ""
    assert description
    tooltip = binding.tooltip()
    if binding.tooltip_text is None:
        assert tooltip.startswith(description)
    else:
        assert tooltip == binding.tooltip_text
    assert "{" not in tooltip


def test_ranges_and_defaults_in_tooltips_are_the_model_s() -> None:
    assert "(256 to 262144)" in settings_table.CONTEXT_SIZE.tooltip()
    assert "(default 5001)" in settings_table.PORT.tooltip()


def test_number_fields_take_their_range_from_the_model(qtbot: QtBot) -> None:
    for binding in BINDINGS:
        if isinstance(binding, Number):
            box = binding.create()
            qtbot.addWidget(box)
            lower, upper = HearthSettings.bounds(binding.key)
            minimum = lower if binding.minimum is None else binding.minimum
            assert (box.minimum(), box.maximum()) == (minimum, upper), binding.key


def test_each_tab_reads_the_settings_of_its_rows(window: MainWindow) -> None:
    for form in (window.quick, window.network, window.context, window.loaded, window.admin):
        read = set(form.read())
        rows = {key for key in read if form.show_error(key, "shown")}
        # The GPU rows are one part that also reads the backend's keys without a row.
        assert read - rows <= {"usecpu", "usecuda"}, form
        assert rows == {key for key in HearthSettings.model_fields if form.error_text(key)}
