"""Which model a request is for.

A request's `model` field is resolved through the catalog (server/models/catalog.py): with a
model folder an unknown name is the dialect's 404, without one every name is the served model.
A request without a name goes to the model loaded now. Each model is planned with its own card
(tokenizer, chat template: a vocab-only load made on first use and kept), never with the
engine, which the scheduler's worker may be swapping or may have unloaded.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from server.core.chat import ChatTemplate
from server.core.engine import SchemaChecker, Tokenizer
from server.devices.placement import Placement
from server.dialects.deps import ModelInfo
from server.dialects.errors import APIError, Dialect, ErrorKind
from server.models.catalog import CatalogEntry, ModelCatalog


class Card(Tokenizer, SchemaChecker, Protocol):
    @property
    def chat_template(self) -> ChatTemplate: ...

    def close(self) -> None: ...


@dataclass
class ModelChoice:
    catalog: ModelCatalog
    load_card: Callable[[Path], Card]
    context_size: int
    # Tells the engine pool about a model that joined the catalog (a finished /api/pull).
    on_added: Callable[[str, Path], None] | None = None
    on_removed: Callable[[str], None] | None = None  # …and about one deleted
    cards: dict[str, tuple[ModelInfo, Card]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def info_for(
        self, requested: str | None, dialect: Dialect, loaded: str | None = None
    ) -> ModelInfo:
        """The model a request names, by the catalog's rules; `loaded`: the model serving now
        (or being loaded), which gets requests without a name."""
        entry = self.catalog.resolve(requested, loaded)
        if entry is None:
            raise APIError(404, f"model '{requested}' not found", ErrorKind.NOT_FOUND, dialect)
        async with self.lock:  # one vocab-only load per model, even when asked at once
            return await asyncio.to_thread(self._card_info, entry)

    def served_info(self, placement: Placement) -> ModelInfo:
        """The served model's info on its card (loaded now), for the routes that describe or
        tokenize without naming a model: never the engine, which may be unloaded or swapped."""
        info = self._card_info(self.catalog.entries[0])
        return dataclasses.replace(info, placement=placement)

    def _card_info(self, entry: CatalogEntry) -> ModelInfo:
        """The entry's info on its card, loading the card on first use."""
        if entry.name not in self.cards:
            card = self.load_card(entry.path)
            info = ModelInfo(
                entry.name, self.context_size, card, card.chat_template, card, entry.path
            )
            self.cards[entry.name] = (info, card)
        return self.cards[entry.name][0]

    def add(self, name: str, path: Path) -> bool:
        """List a model downloaded while serving (an Ollama pull); False if it is unusable or
        there is no model folder (then hub names are not listed)."""
        return self.catalog.lists_downloads and self.add_file(path, name) is not None

    def add_file(self, path: Path, name: str | None = None) -> str | None:
        """List a GGUF (a file already listed keeps its entry, `name` becoming another name of
        it) and tell the pool about a new one; its catalog name, or None if unusable."""
        known = set(self.catalog.names)
        entry = self.catalog.add(path, name)
        if entry is None:
            return None
        if entry.name not in known and self.on_added is not None:
            self.on_added(entry.name, entry.path)
        return entry.name

    def forget(self, path: Path) -> None:
        """Stop listing a deleted model file (its card stays until the server stops: a request
        planned with it may still be waiting; its load then fails with the reason)."""
        gone = [e.name for e in self.catalog.entries if e.path.resolve() == path.resolve()]
        self.catalog.entries = [e for e in self.catalog.entries if e.name not in gone]
        for name in gone:
            if self.on_removed is not None:
                self.on_removed(name)

    def close(self) -> None:
        for _info, card in self.cards.values():
            card.close()
        self.cards.clear()
