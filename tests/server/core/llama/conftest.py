"""Fixtures of the engine's own tests: the real engine on SmolLM2-135M-Instruct."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.core.llama.engine import LlamaCppEngine
from server.core.load_settings import LoadSettings


@pytest.fixture(scope="module")
def instruct_engine(smollm2: Path) -> Iterator[LlamaCppEngine]:
    """SmolLM2-135M-Instruct in a 1024-token context, one per module."""
    engine = LlamaCppEngine.load(smollm2, LoadSettings(contextsize=1024))
    yield engine
    engine.close()
