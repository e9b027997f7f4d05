"""Which model a request is for.

A request's `model` field is resolved through the catalog (server/model_catalog.py): with a
model folder an unknown name is the dialect's 404, without one every name is the served model.
A request without a name goes to the model loaded now. Each model is planned with its own card
(tokenizer, chat template: a vocab-only load made on first use and kept), never with the
engine, which the scheduler's worker may be swapping or may have unloaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from server.api.deps import ModelInfo
from server.api.errors import APIError, Dialect, ErrorKind
from server.core.chat import ChatTemplate
from server.core.engine import SchemaChecker, Tokenizer
from server.model_catalog import ModelCatalog


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
    cards: dict[str, tuple[ModelInfo, Card]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def info_for(
        self, requested: str | None, dialect: Dialect, loaded: str | None = None
    ) -> ModelInfo:
        """The model a request names; without a name, `loaded` (the model serving now)."""
        if not (requested or "").strip() and loaded is not None:
            requested = loaded
        entry = self.catalog.resolve(requested)
        if entry is None:
            raise APIError(404, f"model '{requested}' not found", ErrorKind.NOT_FOUND, dialect)
        async with self.lock:  # one vocab-only load per model, even when asked at once
            if entry.name not in self.cards:
                card = await asyncio.to_thread(self.load_card, entry.path)
                info = ModelInfo(
                    entry.name, self.context_size, card, card.chat_template, card, entry.path
                )
                self.cards[entry.name] = (info, card)
        return self.cards[entry.name][0]

    def add(self, name: str, path: Path) -> bool:
        """List a model downloaded while serving (an Ollama pull); False if it is unusable or
        there is no model folder (then every name is the served model: nothing to switch to)."""
        if not self.catalog.has_model_dir:
            return False
        if any(entry.name == name for entry in self.catalog.entries):
            return True
        entry = self.catalog.add(path, name)
        if entry is not None and self.on_added is not None:
            self.on_added(entry.name, entry.path)
        return entry is not None

    def add_file(self, path: Path) -> str | None:
        """List a GGUF named by an admin `.kcpps` file; its name, or None if unusable."""
        entry = self.catalog.add(path)
        if entry is None:
            return None
        if self.on_added is not None:
            self.on_added(entry.name, entry.path)
        return entry.name

    def forget(self, path: Path) -> None:
        """Stop listing a deleted model file (its card stays until the server stops: a request
        planned with it may still be waiting; the load then fails with a clear error)."""
        self.catalog.entries = [e for e in self.catalog.entries if e.path != path]

    def close(self) -> None:
        for _info, card in self.cards.values():
            card.close()
        self.cards.clear()
