"""Which model a request is for, with --modeldir (issue 12, in progress).

A request's `model` field is resolved through the catalog (server/model_catalog.py): an
unknown name is the dialect's 404. Each listed model is planned with its own card (tokenizer,
chat template: a vocab-only load made on first use and kept), never with the engine, which the
scheduler's worker may be swapping. Without --modeldir there is no ModelChoice and every
request goes to the one loaded model, as before.
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
    cards: dict[str, tuple[ModelInfo, Card]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def info_for(self, requested: str | None, dialect: Dialect) -> ModelInfo:
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

    def close(self) -> None:
        for _info, card in self.cards.values():
            card.close()
        self.cards.clear()
