"""Which model a request is for.

A request's `model` field is resolved through the catalog (server/models/catalog.py): with a
model folder an unknown name is the dialect's 404, without one every name is the served model.
A request without a name goes to the model loaded now. Each model is planned with its own card
(tokenizer, chat template: a vocab-only load made on first use and kept), never with the
engine, which the scheduler's worker may be swapping or may have unloaded.

A server always has a model choice: one of a single engine that no pool switches (a scripted
stand-in) is `ModelChoice.only(info)`, which names that model whatever a request asks for,
lists it alone and switches nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from server.core.scheduling.engine import SchemaChecker, Tokenizer
from server.core.templates.chat import ChatTemplate
from server.devices.placement import Placement
from server.dialects.edge.deps import ModelInfo
from server.dialects.edge.errors import APIError, Dialect, ErrorKind
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
    # The one model of a server whose engine no pool switches (the catalog is then empty).
    sole: ModelInfo | None = None
    # What each model file takes besides text ("vision", "audio"): the model --mmproj's
    # projector was loaded for; every other model, text alone.
    modalities: dict[Path, frozenset[str]] = field(default_factory=dict)
    # llama-server's --alias and --tags for the served model: its other names (sorted; the
    # first is its public id) and labels. Its catalog name stays the engine pool's key.
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @classmethod
    def only(cls, info: ModelInfo) -> ModelChoice:
        """The choice of a server of one model that cannot switch: every name is `info`."""
        return cls(ModelCatalog(), _no_card, info.context_size, sole=info)

    @property
    def switches_models(self) -> bool:
        return self.sole is None

    async def info_for(
        self, requested: str | None, dialect: Dialect, loaded: str | None = None
    ) -> ModelInfo:
        """The model a request names, by the catalog's rules; `loaded`: the model serving now
        (or being loaded), which gets requests without a name."""
        if self.sole is not None:
            return self.sole
        entry = self._entry(requested, loaded, dialect)
        async with self.lock:  # one vocab-only load per model, even when asked at once
            return await asyncio.to_thread(self._card_info, entry)

    def named(
        self, requested: str | None, dialect: Dialect, loaded: str | None = None
    ) -> tuple[str, Path | None]:
        """The name and file of the model a request names, without loading its card."""
        if self.sole is not None:
            return self.sole.name, self.sole.path
        entry = self._entry(requested, loaded, dialect)
        return entry.name, entry.path

    def label_served(self, aliases: list[str], tags: list[str]) -> None:
        """Give the served model --alias's names (a request may name it by any) and --tags."""
        self.aliases, self.tags = tuple(aliases), tuple(tags)
        if self.sole is None and self.catalog.entries:
            served = self.catalog.entries[0].name
            self.catalog.aliases.update((alias.lower(), served) for alias in aliases)

    def public_name(self, name: str) -> str:
        """The name the listings and /props give a model: the served one's first alias."""
        return self.aliases[0] if self.aliases and name == self._served_name() else name

    def labels(self, name: str) -> tuple[list[str], list[str]]:
        """(aliases, tags) of a listed model: --alias and --tags for the served one."""
        if name != self._served_name():
            return [], []
        return list(self.aliases), list(self.tags)

    def _served_name(self) -> str | None:
        if self.sole is not None:
            return self.sole.name
        return self.catalog.entries[0].name if self.catalog.entries else None

    def listed(self) -> list[tuple[str, Path | None]]:
        """(name, file) of each model the listing endpoints name."""
        if self.sole is not None:
            return [(self.sole.name, self.sole.path)]
        return [(entry.name, entry.path) for entry in self.catalog.entries]

    def _entry(self, requested: str | None, loaded: str | None, dialect: Dialect) -> CatalogEntry:
        entry = self.catalog.resolve(requested, loaded)
        if entry is None:
            raise APIError(404, f"model '{requested}' not found", ErrorKind.NOT_FOUND, dialect)
        return entry

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
                entry.name,
                self.context_size,
                card,
                card.chat_template,
                card,
                entry.path,
                modalities=self.modalities.get(entry.path, frozenset()),
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


def _no_card(path: Path) -> Card:
    raise RuntimeError(f"a server of one model loads no other's card ({path})")
