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
    DEFAULT_CONTEXT_SIZE,
    default_thread_count,
)


@dataclass(frozen=True)
class TemplateChoice:
    """The chat template the user chose instead of the model's own, and the variables every
    render of a model's template receives (server/core/templates/chat.py)."""

    source: str | None = None  # Jinja text; None: the model's own template
    origin: str = "the model's own"  # in words, for the console and /props: "the file X"
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapters applied on top of the model (KoboldCpp's --lora and --loramult,
    llama-server's --lora and --lora-scaled): server/core/llama/loading/lora.py loads them."""

    paths: tuple[str, ...] = ()  # numbered from 0 in this order, as llama-server does
    # The scales a request gets unless it names its own (llama-server's per-request `lora`),
    # one per adapter. The one list the HTTP side changes in place (POST /lora-adapters), as
    # llama-server changes its own parameters there; each request reads it when it starts.
    scales: list[float] = field(default_factory=list, compare=False)


@dataclass(frozen=True)
class ModelOptions:
    """How llama.cpp loads the model and sizes its KV cache (KV type, flash attention, mmap,
    mlock, RoPE, overrides, MoE on the CPU, BOS): server/core/llama/loading/model.py applies
    them."""

    flash_attention: str = "auto"  # on, off, or auto (on where the device supports it)
    cache_type_k: str = "f16"  # ggml's names: f16, bf16, q8_0, q5_1, q4_0, ...
    cache_type_v: str = "f16"  # a quantized V needs flash attention: f16 when it is off
    load_mode: str = "auto"  # llama.cpp's: auto, none, mmap, mlock, mmap+mlock, dio
    offload_kv: bool = True  # False (--lowvram): the KV cache stays in system memory
    rope_freq_base: float = 0.0  # 0: the model's own
    rope_freq_scale: float = 0.0  # 0: the model's own
    kv_overrides: tuple[tuple[str, str, str], ...] = ()  # (key, int|float|bool|str, value)
    tensor_overrides: tuple[tuple[str, str], ...] = ()  # (regex, buffer type name)
    moe_cpu_layers: int = 0  # the experts of the first N layers stay on the CPU
    moe_experts: int = -1  # experts used per token; -1: the model's own
    add_bos: bool = True  # False (--nobostoken): prompts get no BOS token
    gen_limit: int = 0  # the most tokens any request generates; 0: no limit
    # Meant for this model file alone: a draft model (draft_model.py) takes none.
    lora: LoraSettings = field(default_factory=LoraSettings)

    def fingerprint(self) -> str:
        """What of these a saved KV state depends on, for the prompt cache on disk (the cache
        types and their layout under flash attention, RoPE, metadata overrides)."""
        return (
            f"kv={self.cache_type_k}/{self.cache_type_v}|fa={self.flash_attention}"
            f"|rope={self.rope_freq_base}/{self.rope_freq_scale}"
            f"|kvo={self.kv_overrides}|experts={self.moe_experts}|bos={self.add_bos}"
        )


@dataclass(frozen=True)
class SpeculationSettings:
    """Speculative decoding: which drafter (n-grams of the text so far, or a draft model) and
    its sizes; server/core/llama/ applies it (speculation.py)."""

    kind: str = "none"  # llama-server's --spec-type: none, ngram-simple or ngram-mod
    ngram_size_n: int = 12  # ngram-simple: tokens looked up
    ngram_size_m: int = 48  # ngram-simple: the longest draft
    mod_n_match: int = 24  # ngram-mod: tokens looked up
    mod_n_min: int = 48  # ngram-mod: fewer found, no draft
    mod_n_max: int = 64  # ngram-mod: the longest draft
    # A draft model's (KoboldCpp's draftamount, llama-server's --spec-draft-n-max / -n-min);
    # the n-gram kinds have their own sizes above, as in llama-server.
    draft_max: int = 8
    draft_min: int = 0
    draft_p_min: float = 0.75  # a draft model's guess less likely than this ends its draft
    draft_model: str | None = None  # KoboldCpp's draftmodel
    draft_gpu_layers: int = 999
    draft_gpu_split: tuple[float, ...] | None = None


@dataclass(frozen=True)
class MediaSettings:
    """The multimodal projector (KoboldCpp's --mmproj): server/core/llama/loading/media.py loads it
    beside the model it was made for (`for_model`; None: whichever model loads)."""

    projector: str | None = None
    for_model: str | None = None
    on_cpu: bool = False  # --mmprojcpu
    image_tokens: tuple[int, int] = (-1, -1)  # --visionmintokens, --visionmaxtokens


@dataclass(frozen=True)
class LoadSettings:
    """Every default here must be what `HearthSettings`' default becomes (one default per
    setting: tests/server/settings/test_one_source.py fails when two disagree)."""

    contextsize: int = DEFAULT_CONTEXT_SIZE
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
    media: MediaSettings = field(default_factory=MediaSettings)
    # llama-server's --pooling for the embeddings routes (server/core/llama/embedding/embedder.py):
    # none, mean, cls, last or rank; None: the model's own (else the mean).
    pooling: str | None = None
