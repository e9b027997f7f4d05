"""Form building blocks shared by the settings tabs: labelled fields with a tooltip, a valid
range, and an error label beside each field for values the settings model rejects."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from server.settings.config import HearthSettings

ERROR_STYLE = "color: #b3261e;"


class SettingsForm(QWidget):
    """A tab: a form of fields, each with an error label keyed by its settings name."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QFormLayout(self)
        self._errors: dict[str, QLabel] = {}

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

    def add_check(self, key: str, label: str, tooltip: str) -> QCheckBox:
        box = QCheckBox(label)
        self.add_row(key, "", box, tooltip)
        return box

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


def spin_box(
    setting: str, special: str | None = None, step: int = 1, minimum: int | None = None
) -> QSpinBox:
    """An integer field with the range the settings model gives `setting` (a launcher rule
    may raise the `minimum`); `special` names the minimum (e.g. "Auto" for -1)."""
    lower, upper = HearthSettings.bounds(setting)
    assert lower is not None and upper is not None, f"{setting} has no range"
    box = QSpinBox()
    box.setRange(lower if minimum is None else minimum, upper)
    box.setSingleStep(step)
    if special:
        box.setSpecialValueText(special)
    return box


def line_edit(placeholder: str = "", password: bool = False) -> QLineEdit:
    edit = QLineEdit()
    edit.setPlaceholderText(placeholder)
    if password:
        edit.setEchoMode(QLineEdit.EchoMode.Password)
    return edit


def folder_picker(edit: QLineEdit, title: str) -> QWidget:
    """`edit` with a Browse… button beside it that fills it with a folder the user picks
    (starting from the folder it names); the row is what a form shows."""

    def choose_folder() -> None:
        folder = QFileDialog.getExistingDirectory(edit, title, edit.text().strip())
        if folder:
            edit.setText(folder)

    return _with_browse(edit, choose_folder)


def file_picker(edit: QLineEdit, title: str, file_filter: str) -> QWidget:
    """`edit` with a Browse… button that fills it with a file the user picks."""

    def choose_file() -> None:
        path, _ = QFileDialog.getOpenFileName(edit, title, edit.text().strip(), file_filter)
        if path:
            edit.setText(path)

    return _with_browse(edit, choose_file)


def _with_browse(edit: QLineEdit, choose: Callable[[], None]) -> QWidget:
    browse = QPushButton("Browse…")
    browse.clicked.connect(choose)
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(edit, 1)
    layout.addWidget(browse)
    return row
