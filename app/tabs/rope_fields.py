"""The Context tab's Custom RoPE Config, KoboldCpp's way: a box, then RoPE Scale and RoPE Base,
all one setting, `ropeconfig` ([scale, base]; a scale of 0 leaves both to the model).

What a file says is saved back as it was while the user leaves the fields alone (a base of
20000 under a scale of 0 too, which KoboldCpp's launcher would reset). llama-server's
--rope-scale and --rope-freq-base (`rope_scale`, `rope_freq_base`) win over these when set
(HearthSettings.rope_frequencies); they have no field, and a note under these says so.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.tabs.fields import INFO_STYLE, ExactDoubleSpin
from server.settings.config import HearthSettings

SHOWN_SCALE = 1.0  # what RoPE Scale shows while the model's own is used (KoboldCpp's 1.0)
MAX_BASE = 1e9


class RopeFields(QObject):
    """The box, the two numbers and the note; loads and reads `ropeconfig`."""

    tooltip = (
        "RoPE scaling of the model's positions (KoboldCpp's --ropeconfig SCALE BASE). Unticked: "
        "the model's own. RoPE Scale below 1 stretches the positions (0.5: twice the context); "
        "RoPE Base is the frequency base (Model's own: 0)."
    )

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.custom = QCheckBox("Custom RoPE Config")
        self.scale = ExactDoubleSpin()
        self.scale.setDecimals(4)
        self.scale.setRange(0.0001, 1000.0)
        self.scale.setSingleStep(0.05)
        self.base = ExactDoubleSpin()
        self.base.setDecimals(1)
        self.base.setRange(0.0, MAX_BASE)
        self.base.setSingleStep(1000.0)
        self.base.setSpecialValueText("Model's own")
        self.note = QLabel()
        self.note.setStyleSheet(INFO_STYLE)
        self.note.setWordWrap(True)
        self.note.hide()
        self.custom.toggled.connect(self._custom_toggled)
        self._custom_toggled(False)

    def row(self) -> QWidget:
        """The box and the two numbers on one line, the note under them."""
        numbers = QHBoxLayout()
        numbers.setContentsMargins(0, 0, 0, 0)
        numbers.addWidget(self.custom)
        numbers.addSpacing(12)
        for caption, box in (("RoPE Scale:", self.scale), ("RoPE Base:", self.base)):
            numbers.addWidget(QLabel(caption))
            numbers.addWidget(box)
        numbers.addStretch(1)
        row = QWidget()
        layout = QVBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(numbers)
        layout.addWidget(self.note)
        return row

    def _custom_toggled(self, custom: bool) -> None:
        self.scale.setEnabled(custom)
        self.base.setEnabled(custom)

    def load(self, settings: HearthSettings) -> None:
        scale, base = settings.ropeconfig
        self.custom.setChecked(scale > 0)
        self.scale.load(scale if scale > 0 else SHOWN_SCALE)
        self.base.load(base)
        flags = [
            f"{flag} {value:g}"
            for flag, value in (
                ("--rope-scale", settings.rope_scale),
                ("--rope-freq-base", settings.rope_freq_base),
            )
            if value > 0
        ]
        verb = "win" if len(flags) > 1 else "wins"
        self.note.setText(
            f"Also set: llama-server's {' and '.join(flags)}, which {verb} over these."
            if flags
            else ""
        )
        self.note.setVisible(bool(flags))

    def read(self) -> dict[str, Any]:
        # Unticked, the scale is 0 (the model's own) and the base stays what was loaded.
        scale = self.scale.exact_value() if self.custom.isChecked() else 0.0
        return {"ropeconfig": [scale, self.base.exact_value()]}
