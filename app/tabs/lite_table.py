"""The bindings of KoboldAI Lite's server features (server/settings/lite_fields.py), as
KoboldCpp's launcher places them: Shared Multiplayer and Enable WebSearch on the Network tab,
Preload Story and SaveData File on the Loaded Files tab. Kept beside app.tabs.settings_table
(the table of every other setting) as a table of their own, the same way.

A launch template (`.kcppt`) embeds the preloaded story itself rather than naming a file:
Preload Story then shows that it holds one, and saves it back as it was unless a file is
chosen instead (`StoryFile`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from PySide6.QtWidgets import QLineEdit, QWidget

from app.tabs.bindings import Check, File
from app.tabs.fields import new_file_picker

_EMBEDDED = "hearthEmbeddedStory"  # the editor's property holding an embedded story's JSON
EMBEDDED_PLACEHOLDER = "a story embedded in the loaded file (choose a file to replace it)"


@dataclass(frozen=True, kw_only=True)
class StoryFile(File):
    """A story file's path, or a story embedded in the settings (a JSON object) kept as it
    was while no path is typed."""

    def load(self, editor: QLineEdit, value: Any) -> None:
        embedded = isinstance(value, dict)
        editor.setProperty(_EMBEDDED, json.dumps(value) if embedded else "")
        editor.setPlaceholderText(EMBEDDED_PLACEHOLDER if embedded else self.placeholder)
        super().load(editor, None if embedded else value)

    def read(self, editor: QLineEdit) -> Any:
        path = super().read(editor)
        embedded = editor.property(_EMBEDDED)
        if path is None and embedded:
            return json.loads(embedded)
        return path


@dataclass(frozen=True, kw_only=True)
class NewFile(File):
    """A file's path, which Browse… may also name anew (the server creates it)."""

    def row_widget(self, editor: QLineEdit) -> QWidget:
        return new_file_picker(editor, self.title, self.file_filter)


MULTIPLAYER = Check(
    "multiplayer",
    "Shared Multiplayer",
    more="Each player opens the server's KoboldAI Lite page and turns multiplayer on there; "
    "set a password (or API keys) when the players are not all on this computer.",
)
WEBSEARCH = Check(
    "websearch",
    "Enable WebSearch",
    more="Lite's Web Search sends the server the query; the results (at most 3) come with the "
    "text around them on their pages. Pages on this computer or its private network are "
    "never read.",
)
PRELOAD_STORY = StoryFile(
    "preloadstory",
    "Preload Story:",
    placeholder="none: Lite starts empty",
    title="Choose a KoboldAI Lite story (JSON)",
    file_filter="Lite stories (*.json);;All files (*)",
    more="A story saved from Lite (Save File). Read once when the server starts.",
)
SAVEDATA_FILE = NewFile(
    "savedatafile",
    "SaveData File:",
    placeholder="none: no save slots on the server",
    title="Choose or name the save data file",
    file_filter="Save data (*.sqlite *.db *.jsondb);;All files (*)",
    more="Lite then offers 12 save slots on the server, shared by everyone who uses it. A "
    "KoboldCpp .jsondb file is imported (the JSON is kept beside it).",
)
