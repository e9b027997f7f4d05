"""KoboldCpp's `--savedatafile`: KoboldAI Lite's save slots kept on the server.

Lite lists SLOT_COUNT slots by title, saves a story (its compressed save text, opaque here)
with a title and a format into one, loads it back, and erases a slot by saving nothing into
it. KoboldCpp keeps them all in one JSON object, rewritten whole (not atomically) on every
save, unbounded but for 10 MB per story. Hearth keeps them in a SQLite database instead: a
save is one transaction, so a crash mid-save loses nothing that was saved before, several
requests (or two servers over one file) never interleave their writes, and only the slot
saved is written. Each call opens its own connection, so any thread may call; the routes run
them off the event loop. Sizes are bounded (a slot's data, its title and format) and a save
over a bound is refused with the reason, in KoboldCpp's words where it has some.

A KoboldCpp `.jsondb` file given as the path is imported once: its slots are written to a new
database, which takes the file's place, and the JSON file is kept beside it with
JSON_BACKUP_SUFFIX added to its name.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SLOT_COUNT = 12  # KoboldCpp's net_save_slots: Lite shows this many
MAX_DATA_BYTES = 10 * 1024 * 1024  # KoboldCpp's bound on one story (there in characters)
MAX_TITLE_CHARS = 1000
MAX_FORMAT_CHARS = 100
UNTITLED = "Untitled Save"  # KoboldCpp's title for a save without one
JSON_BACKUP_SUFFIX = ".koboldcpp.json"
BUSY_SECONDS = 10.0  # how long a call waits for another connection's write
_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS slots (
    slot INTEGER PRIMARY KEY CHECK (slot >= 0),
    title TEXT NOT NULL,
    format TEXT NOT NULL,
    data TEXT NOT NULL,
    saved_at REAL NOT NULL
)
"""


class SaveDataError(Exception):
    """The save data file cannot be used (at start): the message names it and says why."""


class SaveRefused(Exception):
    """A save the slots do not take; the message says why."""


@dataclass(frozen=True, slots=True)
class SavedStory:
    title: str
    format: str
    data: str


class SaveSlots:
    """The save slots in the SQLite database at `path`, created (or imported from KoboldCpp's
    JSON) when opened. SaveDataError when the file cannot be used."""

    def __init__(
        self, path: Path, *, slots: int = SLOT_COUNT, max_data_bytes: int = MAX_DATA_BYTES
    ) -> None:
        self.path = path
        self.slots = slots
        self.max_data_bytes = max_data_bytes
        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # as KoboldCpp does
            if _is_json_file(path):
                _import_koboldcpp_json(path)
            with self._connect() as connection:
                connection.execute("PRAGMA journal_mode=WAL")  # readers never wait on a save
                connection.execute(_SCHEMA)
                connection.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        except (OSError, sqlite3.Error, ValueError) as exc:
            raise SaveDataError(f"{path}: {_reason(exc)}") from None

    def titles(self) -> list[str]:
        """Every slot's title, "" for an empty one (KoboldCpp's /api/extra/data/list)."""
        titles = [""] * self.slots
        with self._connect() as connection:
            rows = connection.execute("SELECT slot, title FROM slots WHERE slot < ?", (self.slots,))
            for slot, title in rows:
                titles[slot] = title
        return titles

    def load(self, slot: int) -> SavedStory | None:
        """What `slot` holds; None when it is empty or not a slot."""
        if not 0 <= slot < self.slots:
            return None
        with self._connect() as connection:
            row = connection.execute(
                "SELECT title, format, data FROM slots WHERE slot = ?", (slot,)
            ).fetchone()
        return SavedStory(*row) if row else None

    def save(self, slot: int, title: str, data_format: str, data: str) -> None:
        """Put a story in `slot`, or empty it when `data` is empty; SaveRefused if not."""
        if not 0 <= slot < self.slots:
            raise SaveRefused(
                f"No story submitted or invalid slot! (slots are 0 to {self.slots - 1})"
            )
        if not data:
            with self._connect() as connection:
                connection.execute("DELETE FROM slots WHERE slot = ?", (slot,))
            return
        self._check_sizes(title, data_format, data)
        with self._connect() as connection:  # one transaction: committed whole, or not at all
            connection.execute(
                "INSERT OR REPLACE INTO slots (slot, title, format, data, saved_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (slot, title or UNTITLED, data_format, data, time.time()),
            )

    def _check_sizes(self, title: str, data_format: str, data: str) -> None:
        size = len(data.encode("utf-8", "surrogatepass"))
        if size > self.max_data_bytes:
            raise SaveRefused(
                f"Story is too long! ({size:,} bytes; a slot holds {self.max_data_bytes:,})"
            )
        if len(title) > MAX_TITLE_CHARS:
            raise SaveRefused(f"The title is too long (at most {MAX_TITLE_CHARS} characters)")
        if len(data_format) > MAX_FORMAT_CHARS:
            raise SaveRefused(f"The format is too long (at most {MAX_FORMAT_CHARS} characters)")

    def _connect(self) -> _Connection:
        return _Connection(self.path)


class _Connection:
    """A connection for one call, in one transaction (committed on success, rolled back on
    an error) and closed after it: sqlite3's own context manager does not close."""

    def __init__(self, path: Path) -> None:
        self._connection = sqlite3.connect(path, timeout=BUSY_SECONDS)

    def __enter__(self) -> sqlite3.Connection:
        return self._connection.__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        try:
            self._connection.__exit__(*exc_info)
        finally:
            self._connection.close()


def _is_json_file(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(64).lstrip().startswith(b"{")
    except FileNotFoundError:
        return False


def _import_koboldcpp_json(path: Path) -> None:
    """KoboldCpp's {"<slot>": {"title", "format", "data"}} file replaced by a database with
    the same slots; the JSON file is kept beside it."""
    if path.stat().st_size > (SLOT_COUNT + 1) * MAX_DATA_BYTES:
        raise ValueError("a JSON file too large to be KoboldCpp's save data")
    saved = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(saved, dict):
        raise ValueError("JSON, but not KoboldCpp's save data (an object of slots)")
    fresh = path.with_name(path.name + ".importing")
    fresh.unlink(missing_ok=True)
    with _Connection(fresh) as connection:
        connection.execute(_SCHEMA)
        for key, entry in saved.items():
            if str(key).isdigit() and isinstance(entry, dict) and entry.get("data"):
                row = (int(key), str(entry.get("title") or UNTITLED), str(entry.get("format", "")))
                connection.execute(
                    "INSERT OR REPLACE INTO slots VALUES (?, ?, ?, ?, ?)",
                    (*row, str(entry["data"]), time.time()),
                )
    os.replace(path, path.with_name(path.name + JSON_BACKUP_SUFFIX))
    os.replace(fresh, path)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON nor a SQLite database ({exc.msg})"
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
        return "not a SQLite database (nor KoboldCpp's JSON save data)"
    return str(exc)
