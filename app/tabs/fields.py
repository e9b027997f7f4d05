"""Widgets the settings tabs are built of: a number field with the settings model's range, a
decimal field that saves back what it loaded, a line of text, a path (or several) with a
Browse… button; and the styles of an error and of a note beside a field."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from server.settings.config import HearthSettings

ERROR_STYLE = "color: #b3261e;"
INFO_STYLE = "color: #5f6368;"  # a grey note, not an error
PATH_SEPARATOR = ";"  # between the files of a field that takes several (LoRA)


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


class ExactDoubleSpin(QDoubleSpinBox):
    """A decimal field that gives back the value it was loaded with, exactly, until the user
    changes it: the box shows a value rounded to its decimals, and a file's 0.123456 must
    save back as it was, not as 0.12."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._loaded: tuple[float, float] | None = None  # (as loaded, as shown)

    def load(self, value: float) -> None:
        self.setValue(value)
        self._loaded = (value, self.value())

    def exact_value(self) -> float:
        if self._loaded is not None and self.value() == self._loaded[1]:
            return self._loaded[0]
        return self.value()


def decimal_box(setting: str, decimals: int, step: float) -> ExactDoubleSpin:
    """A decimal field with the range the settings model gives `setting`."""
    lower, upper = HearthSettings.bounds(setting)
    assert lower is not None and upper is not None, f"{setting} has no range"
    box = ExactDoubleSpin()
    box.setDecimals(decimals)
    box.setRange(lower, upper)
    box.setSingleStep(step)
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


def new_file_picker(edit: QLineEdit, title: str, file_filter: str) -> QWidget:
    """`edit` with a Browse… button that fills it with a file the user picks or names anew (a
    file the server creates when missing, and opens rather than replaces when there)."""

    def choose_file() -> None:
        keep = QFileDialog.Option.DontConfirmOverwrite
        path, _ = QFileDialog.getSaveFileName(
            edit, title, edit.text().strip(), file_filter, options=keep
        )
        if path:
            edit.setText(path)

    return _with_browse(edit, choose_file)


def files_picker(edit: QLineEdit, title: str, file_filter: str) -> QWidget:
    """`edit` with a Browse… button that fills it with one or more files the user picks, shown
    as one entry (PATH_SEPARATOR between them)."""

    def choose_files() -> None:
        first = edit.text().split(PATH_SEPARATOR)[0].strip()
        paths, _ = QFileDialog.getOpenFileNames(edit, title, first, file_filter)
        if paths:
            edit.setText(f"{PATH_SEPARATOR} ".join(paths))

    return _with_browse(edit, choose_files)


def _with_browse(edit: QLineEdit, choose: Callable[[], None]) -> QWidget:
    browse = QPushButton("Browse…")
    browse.clicked.connect(choose)
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(edit, 1)
    layout.addWidget(browse)
    return row
