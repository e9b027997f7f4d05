"""KoboldAI Lite's server features as settings: KoboldCpp's `--multiplayer`, `--websearch`,
`--savedatafile` and `--preloadstory`, under KoboldCpp's keys so a `.kcpps` file moves between
the two. Kept apart so the settings model stays readable; `HearthSettings` inherits them, so
they are ordinary settings everywhere (command line, .kcpps, launcher).

Only the settings live here; what serves them is server/dialects/kobold/ (lite.py, with
shared_story.py, save_slots.py and websearch.py), built once at start by the process layer.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from server.settings.flags import flags


class LiteFields(BaseModel):
    # KoboldCpp's --multiplayer: several people write one story (Lite's Shared Multiplayer).
    multiplayer: bool = Field(
        default=False,
        description="Shared multiplayer: KoboldAI Lite's players write one story together "
        "(/api/extra/multiplayer/*).",
        json_schema_extra=flags("--multiplayer"),
    )
    # KoboldCpp's --websearch: Lite's web search, done by the server for the page.
    websearch: bool = Field(
        default=False,
        description="Web search for KoboldAI Lite (/api/extra/websearch): the server searches "
        "the web (DuckDuckGo and others) and reads the public pages it finds.",
        json_schema_extra=flags("--websearch"),
    )
    # KoboldCpp's --savedatafile: Lite's save slots on the server. KoboldCpp keeps them in a
    # JSON file; Hearth in a SQLite database at this path (a KoboldCpp file is imported).
    savedatafile: str | None = Field(
        default=None,
        description="Keep KoboldAI Lite's server save slots in this file (a SQLite database; "
        "created when missing).",
        json_schema_extra=flags("--savedatafile", metavar="FILE"),
    )
    # KoboldCpp's --preloadstory: a JSON file (or, in a .kcppt, the story itself) Lite loads.
    preloadstory: str | dict[str, Any] | None = Field(
        default=None,
        description="A KoboldAI Lite story (JSON file) every page load starts from "
        "(/api/extra/preloadstory).",
        json_schema_extra=flags("--preloadstory", metavar="FILE"),
    )

    @field_validator("savedatafile", mode="before")
    @classmethod
    def _blank_path_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("preloadstory", mode="before")
    @classmethod
    def _blank_story_is_unset(cls, value: Any) -> Any:
        # "" and {} are KoboldCpp's "none" too; a .kcppt embeds the story as an object.
        if isinstance(value, str):
            return value.strip() or None
        return value or None if isinstance(value, dict) else value
