"""KoboldCpp's Loaded Files tab: LoRA adapters, the multimodal projector, the draft model, and
KoboldAI Lite's preloaded story and save data file (app.tabs.lite_table).

The GGUF text model, the embeddings model and the Jinja template stay on Quick Launch, where
Hearth has always had them. Under each group, a grey note says which of its keys Hearth does
not apply yet and why, in server/settings/key_fates.py's words, so the note goes away by
itself once the server applies them. The draft model's file and GPU layers also reach Quick
Launch's GPU Layers estimate as they change (`draft_changed`), and so do the projector's file
and place (`projector_changed`), which also tell Quick Launch's model line whether the model
takes images or audio. The line under the projector says what its header says it takes, or why
it is no projector.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QWidget

from app.model_info import describe_projector
from app.tabs import lite_table
from app.tabs import settings_table as table
from app.tabs.fields import ERROR_STYLE, INFO_STYLE
from app.tabs.form import SettingsForm
from app.tabs.gpu_fields import setting_file
from server.settings.config import HearthSettings
from server.settings.key_fates import reason_not_applied

LORA_KEYS = ("lora", "loramult")
PROJECTOR_KEYS = ("mmproj", "mmprojcpu", "visionmintokens", "visionmaxtokens")
DRAFT_KEYS = ("draftmodel", "draftamount", "draftgpulayers", "draftgpusplit")


def not_applied_note(keys: Iterable[str]) -> str:
    """What the launcher says beside `keys` that Hearth does not apply (empty: all applied)."""
    reasons = dict.fromkeys(
        reason for reason in map(reason_not_applied, keys) if reason is not None
    )
    return f"Not applied by Hearth: {'; '.join(reasons)}." if reasons else ""


class LoadedFilesTab(SettingsForm):
    # The draft model's file (None: none) and its GPU layers, as the fields say now.
    draft_changed = Signal(object, int)
    # The projector's file (None: none) and whether it is kept on the CPU.
    projector_changed = Signal(object, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lora = self.add(table.LORA)
        self.lora_mult = self.add(table.LORA_MULT)
        self.lora_note = self._note(LORA_KEYS)
        self.projector = self.add(table.PROJECTOR)
        self.projector_info = QLabel()
        self.projector_info.setWordWrap(True)
        self._layout.addRow("", self.projector_info)
        self.projector_cpu = self.add(table.PROJECTOR_CPU)
        self.vision_min_tokens = self.add(table.VISION_MIN_TOKENS)
        self.vision_max_tokens = self.add(table.VISION_MAX_TOKENS)
        self.projector_note = self._note(PROJECTOR_KEYS)
        self.draft_model = self.add(table.DRAFT_MODEL)
        self.draft_amount = self.add(table.DRAFT_AMOUNT)
        self.draft_layers = self.add(table.DRAFT_GPU_LAYERS)
        self.draft_split = self.add(table.DRAFT_GPU_SPLIT)
        self.draft_note = self._note(DRAFT_KEYS)
        self.preload_story = self.add(lite_table.PRELOAD_STORY)
        self.savedata_file = self.add(lite_table.SAVEDATA_FILE)
        self.lora.textChanged.connect(self._lora_changed)
        self.projector.textChanged.connect(self._projector_changed)
        self.projector_cpu.toggled.connect(self._projector_changed)
        self.draft_model.textChanged.connect(self._draft_changed)
        self.draft_layers.valueChanged.connect(self._draft_changed)
        self._lora_changed()
        self._projector_changed()
        self._draft_changed()

    def _note(self, keys: tuple[str, ...]) -> QLabel:
        note = QLabel(not_applied_note(keys))
        note.setStyleSheet(INFO_STYLE)
        self._layout.addRow("", note)
        self._layout.setRowVisible(note, bool(note.text()))  # no gap once all are applied
        return note

    def _lora_changed(self) -> None:
        # The multiplier means something only with adapters; its value is kept either way.
        self.lora_mult.setEnabled(bool(self.lora.text().strip()))

    def _projector_changed(self) -> None:
        # Its place and token bounds mean something only with a projector; kept either way.
        projector = setting_file(self.projector.text())
        for key in PROJECTOR_KEYS[1:]:
            self.row_widget(key).setEnabled(projector is not None)
        info = describe_projector(projector) if projector is not None else None
        self.projector_info.setText(info.text if info is not None else "")
        self.projector_info.setStyleSheet(ERROR_STYLE if info and info.problem else INFO_STYLE)
        self._layout.setRowVisible(self.projector_info, info is not None)
        self.projector_changed.emit(projector, self.projector_cpu.isChecked())

    def _draft_changed(self) -> None:
        # The draft's amount, layers and split mean something only with a draft model; their
        # values are kept (and saved) either way.
        has_draft = bool(self.draft_model.text().strip())
        for key in DRAFT_KEYS[1:]:
            self.row_widget(key).setEnabled(has_draft)
        self.draft_changed.emit(setting_file(self.draft_model.text()), self.draft_layers.value())

    def load(self, settings: HearthSettings) -> None:
        super().load(settings)
        self._projector_changed()
        self._draft_changed()
