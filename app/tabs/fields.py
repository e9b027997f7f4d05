"""Widgets the settings tabs are built of: a number field with the settings model's range, a
line of text, a path with a Browse… button; and the style of an error beside a field."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from server.settings.config import HearthSettings

ERROR_STYLE = "color: #b3261e;"


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
