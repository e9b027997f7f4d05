"""SettingsForm: a tab of the launcher, a form of settings rows built from bindings.

Each row has a caption, a field and an error label beside it, keyed by the settings name, for
values the settings model rejects. `load(settings)` fills the fields and `read()` returns their
values as settings keys, both over the form's parts in row order: a part is a binding with the
widget it made, or a group of fields with its own `load` and `read` (the GPU fields). A form
never saves or validates on its own; the main window does both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol

from PySide6.QtWidgets import QFormLayout, QHBoxLayout, QLabel, QWidget

from app.tabs.bindings import Binding, W
from app.tabs.fields import ERROR_STYLE
from server.settings.config import HearthSettings


class FormPart(Protocol):
    """Settings moving both ways between some widgets and the settings."""

    def load(self, settings: HearthSettings) -> None: ...

    def read(self) -> dict[str, Any]: ...


class BoundField(Generic[W]):
    """A binding and the widget it made: one setting, both ways."""

    def __init__(self, binding: Binding[W], editor: W) -> None:
        self.binding = binding
        self.editor = editor

    def load(self, settings: HearthSettings) -> None:
        self.binding.load(self.editor, getattr(settings, self.binding.key))

    def read(self) -> dict[str, Any]:
        return {self.binding.key: self.binding.read(self.editor)}


class SettingsForm(QWidget):
    """A tab: a form of fields, each with an error label keyed by its settings name."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QFormLayout(self)
        self._errors: dict[str, QLabel] = {}
        self._parts: list[FormPart] = []
        self._rows: dict[str, QWidget] = {}

    def add(self, binding: Binding[W], row: Callable[[W], QWidget] | None = None) -> W:
        """A row for `binding`; returns the widget that edits the setting. `row` builds what
        the row shows around it when the binding's own picker is not enough."""
        editor = binding.create()
        shown = binding.row_widget(editor) if row is None else row(editor)
        tooltip = binding.tooltip()
        if shown is not editor:
            editor.setToolTip(tooltip)
        self.add_row(binding.key, binding.caption(), shown, tooltip)
        self._rows[binding.key] = shown
        self.add_part(BoundField(binding, editor))
        return editor

    def add_part(self, part: FormPart) -> None:
        """Fields (already in rows) that load and read together, in this place of the order."""
        self._parts.append(part)

    def row_widget(self, key: str) -> QWidget:
        """What the row of a binding shows: its field, or the picker around it."""
        return self._rows[key]

    def add_row(self, key: str, label: str, field: QWidget, tooltip: str) -> None:
        field.setToolTip(tooltip)
        error = QLabel()
        error.setStyleSheet(ERROR_STYLE)
        error.setWordWrap(True)
        error.hide()
        self._errors[key] = error
        row = QHBoxLayout()
        row.addWidget(field, 1)
        row.addWidget(error, 1)
        caption = QLabel(label)
        caption.setToolTip(tooltip)
        self._layout.addRow(caption, row)

    def load(self, settings: HearthSettings) -> None:
        for part in self._parts:
            part.load(settings)

    def read(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for part in self._parts:
            values.update(part.read())
        return values

    def show_error(self, key: str, message: str) -> bool:
        """Show `message` beside the field for `key`; False if this tab has no such field."""
        label = self._errors.get(key)
        if label is None:
            return False
        label.setText(message)
        label.show()
        return True

    def clear_errors(self) -> None:
        for label in self._errors.values():
            label.clear()
            label.hide()

    def error_text(self, key: str) -> str:
        label = self._errors.get(key)
        return label.text() if label is not None and not label.isHidden() else ""
