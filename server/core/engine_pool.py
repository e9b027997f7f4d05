"""EnginePool: several models behind one engine, switched between jobs (issue 12, in progress).

The scheduler's worker thread is the only caller of `use(name)` and of the generation methods,
so a model is loaded, used and closed on one thread. Up to `max_loaded` engines stay loaded,
least recently used evicted first. A model that fails to load fails only the job that asked
for it: the models loaded before stay (with one slot, the evicted one is loaded again).

The API side must not reach into the pool's engines (they may be closed between two calls):
requests are planned with each model's vocabulary (server/core/llama/model.Vocabulary).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from server.core.chat import ChatTemplate
from server.core.engine import BatchEngine, Engine, EngineError
from server.core.placement import Placement
from server.core.types import EngineEvent, GenerationRequest

logger = logging.getLogger(__name__)

Loader = Callable[[Path], Engine]


class EnginePool:
    def __init__(
        self,
        first_name: str,
        first: Engine,
        paths: dict[str, Path],
        loader: Loader,
        max_loaded: int = 1,
    ) -> None:
        self._paths = paths
        self._loader = loader
        self._max_loaded = max(1, max_loaded)
        self._loaded: OrderedDict[str, Engine] = OrderedDict([(first_name, first)])
        self._current_name = first_name
        self._slots = first.parallel_slots if isinstance(first, BatchEngine) else 1

    @property
    def current(self) -> Engine:
        return self._loaded[self._current_name]

    @property
    def current_name(self) -> str:
        return self._current_name

    @property
    def loaded_names(self) -> list[str]:
        return list(self._loaded)

    def use(self, name: str | None) -> None:
        """Make `name` the current model, loading it (and evicting) when needed. None: keep."""
        if name is None or name == self._current_name:
            return
        if name in self._loaded:
            self._loaded.move_to_end(name)
            self._current_name = name
            return
        path = self._paths.get(name)
        if path is None:
            raise EngineError(f"model '{name}' is not in the catalog")
        evicted: list[tuple[str, Path | None]] = []
        while len(self._loaded) >= self._max_loaded:
            old_name, old = self._loaded.popitem(last=False)
            evicted.append((old_name, old.model_path))
            logger.info("Unloading %s", old_name)
            old.close()
        try:
            engine = self._loader(path)
        except EngineError:
            self._reload(evicted)
            raise
        self._loaded[name] = engine
        self._current_name = name

    def _reload(self, evicted: list[tuple[str, Path | None]]) -> None:
        """After a failed load: bring back what was unloaded for it."""
        for name, path in evicted:
            if path is not None:
                self._loaded[name] = self._loader(path)
        if self._current_name not in self._loaded and self._loaded:
            self._current_name = next(reversed(self._loaded))

    # -- the Engine protocol, delegated to the current model (worker thread only) --------------

    @property
    def model_name(self) -> str:
        return self._current_name

    @property
    def context_size(self) -> int:
        return self.current.context_size

    @property
    def model_path(self) -> Path | None:
        return self.current.model_path

    @property
    def chat_template(self) -> ChatTemplate:
        return self.current.chat_template

    @property
    def placement(self) -> Placement:
        return self.current.placement

    @property
    def parallel_slots(self) -> int:
        return self._slots

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        return self.current.tokenize(text, special)

    def detokenize(self, ids: list[int], special: bool = True) -> str:
        return self.current.detokenize(ids, special)

    def count_prompt_tokens(self, request: GenerationRequest) -> int:
        return self.current.count_prompt_tokens(request)

    def check_json_schema(self, schema: dict[str, Any]) -> None:
        self.current.check_json_schema(schema)

    def generate(
        self, request: GenerationRequest, cancelled: threading.Event
    ) -> Iterator[EngineEvent]:
        return self.current.generate(request, cancelled)

    def start_sequence(self, request: GenerationRequest, cancelled: threading.Event) -> object:
        engine = self.current
        assert isinstance(engine, BatchEngine)
        return engine.start_sequence(request, cancelled)

    def step(self) -> list[tuple[object, EngineEvent]]:
        engine = self.current
        assert isinstance(engine, BatchEngine)
        return engine.step()

    def close(self) -> None:
        for engine in self._loaded.values():
            engine.close()
        self._loaded.clear()
