"""What loading a model reads from the settings, as a plain frozen dataclass.

The core never sees the settings model (pydantic, the launcher's too): the running process
builds this from `HearthSettings` at the edge (`server/process/load_settings.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from server.base.defaults import (
    DEFAULT_BATCH,
    DEFAULT_CACHE_DISK_MIB,
    DEFAULT_CACHE_RAM_MIB,
    default_thread_count,
)


@dataclass(frozen=True)
class TemplateChoice:
    """The chat template the user chose instead of the model's own, and the variables every
    render of a model's template receives (server/core/chat.py)."""

    source: str | None = None  # Jinja text; None: the model's own template
    origin: str = "the model's own"  # in words, for the console and /props: "the file X"
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class ModelOptions:
    """How llama.cpp loads the model and sizes its KV cache (KV type, flash attention, mmap,
    mlock, RoPE, overrides, MoE on the CPU, BOS): server/core/llama/model.py applies them."""


@dataclass(frozen=True)
class SpeculationSettings:
    """Speculative decoding: which drafter (n-grams of the text so far, or a draft model) and
    its sizes; server/core/llama/ applies it."""


@dataclass(frozen=True)
class LoadSettings:
    contextsize: int = 4096
    batch_size: int = DEFAULT_BATCH
    thread_count: int = field(default_factory=default_thread_count)
    parallelrequests: int = 1
    gpulayers: int = -1  # -1: as many as fit (auto)
    usecpu: bool = False
    usevulkan: tuple[int, ...] | None = None  # Vulkan device indices; () means the default
    usecuda: tuple[str, ...] | None = None  # KoboldCpp's words after --usecuda
    cuda_device: int | None = None
    rpc: str | None = None  # RPC worker addresses, comma-separated
    tensor_split: tuple[float, ...] | None = None
    noshift: bool = False
    nofastforward: bool = False
    cacheram_mib: int = DEFAULT_CACHE_RAM_MIB  # the prompt cache's bound; 0: off
    smartcache: int = 0  # at most this many saved states (0: bounded by bytes alone)
    privatecache: bool = False  # cached prompts serve only their owner (GenerationRequest)
    cachedir: str | None = None  # also keep cached prompts on disk, here
    cachedisk_mib: int = DEFAULT_CACHE_DISK_MIB  # the bound on that folder (per model)
    template: TemplateChoice = field(default_factory=TemplateChoice)  # the chat template
    options: ModelOptions = field(default_factory=ModelOptions)  # KV type, flash attention, ...
    speculation: SpeculationSettings = field(default_factory=SpeculationSettings)
