"""A binding ties one setting to the widget that edits it: which kind of widget, its caption,
and how a value goes into the widget and comes back out.

What the settings model already says is taken from it, not written again: a number's range
(its field's `ge`/`le`), whether an empty text means "not set" (a field whose default is None),
and the tooltip (the field's description, followed by what only the launcher needs to add).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Generic, TypeVar, get_args

from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QSpinBox, QWidget

from app.tabs.fields import (
    PATH_SEPARATOR,
    ExactDoubleSpin,
    decimal_box,
    file_picker,
    files_picker,
    folder_picker,
    line_edit,
    spin_box,
)
from server.settings.config import HearthSettings

W = TypeVar("W", bound=QWidget)


@dataclass(frozen=True)
class Binding(Generic[W]):
    """One setting on a tab. `key` is the settings key (also the `.kcpps` key), `label` the
    caption left of the field."""

    key: str
    label: str
    _: KW_ONLY
    more: str = ""  # said after the field's description in the tooltip
    # The launcher's own tooltip instead of the description, where the description speaks of
    # the command line (--modeldir) or a box shows the key's opposite (FastForwarding).
    tooltip_text: str | None = None

    def __post_init__(self) -> None:
        if self.key not in HearthSettings.model_fields:
            raise ValueError(f"{self.key} is not a setting")

    def tooltip(self) -> str:
        """The tooltip; `{min}`, `{max}` and `{default}` in the launcher's words are the
        field's own."""
        field = HearthSettings.model_fields[self.key]
        lower, upper = HearthSettings.bounds(self.key)
        own = self.tooltip_text if self.tooltip_text is not None else self.more
        own = own.format(min=lower, max=upper, default=field.default)
        if self.tooltip_text is not None:
            return own
        return " ".join(part for part in (field.description or "", own) if part)

    def caption(self) -> str:
        return self.label

    def create(self) -> W:
        raise NotImplementedError

    def row_widget(self, editor: W) -> QWidget:
        """What the row shows: the editor, or the editor inside a picker."""
        return editor

    def load(self, editor: W, value: Any) -> None:
        raise NotImplementedError

    def read(self, editor: W) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Text(Binding[QLineEdit]):
    """A line of text; for a setting that may be unset, an empty line reads as None."""

    placeholder: str = ""
    secret: bool = False  # hidden as typed, and read as typed (a password's spaces are its own)

    def create(self) -> QLineEdit:
        return line_edit(self.placeholder, password=self.secret)

    def load(self, editor: QLineEdit, value: Any) -> None:
        editor.setText(value or "")

    def read(self, editor: QLineEdit) -> str | None:
        text = editor.text() if self.secret else editor.text().strip()
        unset_is_none = HearthSettings.model_fields[self.key].default is None
        return (text or None) if unset_is_none else text


@dataclass(frozen=True, kw_only=True)
class Folder(Text):
    """A folder's path, with a Browse… button."""

    title: str  # of the folder dialog

    def row_widget(self, editor: QLineEdit) -> QWidget:
        return folder_picker(editor, self.title)


@dataclass(frozen=True, kw_only=True)
class File(Text):
    """A file's path, with a Browse… button."""

    title: str  # of the file dialog
    file_filter: str  # the dialog's "name (*.ext);;…" choices

    def row_widget(self, editor: QLineEdit) -> QWidget:
        return file_picker(editor, self.title, self.file_filter)


@dataclass(frozen=True, kw_only=True)
class Files(Binding[QLineEdit]):
    """Several files' paths in one entry (a list setting; empty: None), with a Browse… that
    picks several at once."""

    placeholder: str = ""
    title: str  # of the file dialog
    file_filter: str  # the dialog's "name (*.ext);;…" choices

    def create(self) -> QLineEdit:
        return line_edit(self.placeholder)

    def row_widget(self, editor: QLineEdit) -> QWidget:
        return files_picker(editor, self.title, self.file_filter)

    def load(self, editor: QLineEdit, value: Any) -> None:
        editor.setText(f"{PATH_SEPARATOR} ".join(value or []))

    def read(self, editor: QLineEdit) -> list[str] | None:
        paths = [path.strip() for path in editor.text().split(PATH_SEPARATOR)]
        return [path for path in paths if path] or None


@dataclass(frozen=True, kw_only=True)
class Shares(Text):
    """A list of numbers written as "3,1" or "3 1" (the settings model reads the text); a
    loaded list shows as "3, 1"."""

    def load(self, editor: QLineEdit, value: Any) -> None:
        editor.setText(", ".join(_number_text(number) for number in value or []))


def _number_text(number: float) -> str:
    short = f"{number:g}"
    return short if float(short) == number else repr(number)  # 0.1234567 as it was


@dataclass(frozen=True, kw_only=True)
class Number(Binding[QSpinBox]):
    """An integer in the range the settings model allows."""

    step: int = 1
    minimum: int | None = None  # a launcher rule above the model's own minimum
    special: str | None = None  # what the minimum shows as ("Auto" for -1)
    # A stored value the field shows as another (a batch size below 16 shows as 512).
    shown_as: Callable[[int], int] | None = None

    def create(self) -> QSpinBox:
        return spin_box(self.key, special=self.special, step=self.step, minimum=self.minimum)

    def load(self, editor: QSpinBox, value: Any) -> None:
        editor.setValue(value if self.shown_as is None else self.shown_as(value))

    def read(self, editor: QSpinBox) -> int:
        return editor.value()


@dataclass(frozen=True, kw_only=True)
class Decimal(Binding[ExactDoubleSpin]):
    """A decimal number in the range the settings model allows; a loaded value the box rounds
    is saved back as it was while the user leaves it alone."""

    decimals: int = 2
    step: float = 0.1

    def create(self) -> ExactDoubleSpin:
        return decimal_box(self.key, self.decimals, self.step)

    def load(self, editor: ExactDoubleSpin, value: Any) -> None:
        editor.load(float(value))

    def read(self, editor: ExactDoubleSpin) -> float:
        return editor.exact_value()


@dataclass(frozen=True, kw_only=True)
class Check(Binding[QCheckBox]):
    """A check box; its `label` is the box's own text (the row has no caption)."""

    inverted: bool = False  # the box says the opposite of the key (FastForwarding: nofastforward)

    def caption(self) -> str:
        return ""

    def create(self) -> QCheckBox:
        return QCheckBox(self.label)

    def load(self, editor: QCheckBox, value: Any) -> None:
        editor.setChecked(bool(value) != self.inverted)

    def read(self, editor: QCheckBox) -> bool:
        return editor.isChecked() != self.inverted


@dataclass(frozen=True, kw_only=True)
class Choice(Binding[QComboBox]):
    """One of the values the settings model allows (its field's Literal), in its order; a
    value may show under a caption of the launcher's own (`captions`)."""

    captions: Mapping[str, str] = field(default_factory=dict)

    def choices(self) -> tuple[str, ...]:
        return get_args(HearthSettings.model_fields[self.key].annotation)

    def create(self) -> QComboBox:
        box = QComboBox()
        for value in self.choices():
            box.addItem(self.captions.get(value, value), value)
        return box

    def load(self, editor: QComboBox, value: Any) -> None:
        editor.setCurrentIndex(max(editor.findData(value), 0))

    def read(self, editor: QComboBox) -> str:
        return str(editor.currentData())


@dataclass(frozen=True, kw_only=True)
class KvTypeChoice(Choice):
    """KoboldCpp's Quantize KV: the cache types by name; a file's old number (0, 1, 2) shows as
    the type it means (f16, q8_0, q4_0) and is saved back as that name, as KoboldCpp 1.116
    writes it."""

    old_numbers: Mapping[int, str] = field(default_factory=lambda: {0: "f16", 1: "q8_0", 2: "q4_0"})

    def choices(self) -> tuple[str, ...]:
        (names,) = [
            arg
            for arg in get_args(HearthSettings.model_fields[self.key].annotation)
            if arg is not int
        ]
        return get_args(names)[:5]  # KoboldCpp's five; the rest stay loadable by name

    def load(self, editor: QComboBox, value: Any) -> None:
        name = self.old_numbers.get(value, value) if isinstance(value, int) else value
        index = editor.findData(name)
        if index < 0 and isinstance(name, str):  # a type KoboldCpp's list lacks: kept
            editor.addItem(name, name)
            index = editor.findData(name)
        editor.setCurrentIndex(max(index, 0))
