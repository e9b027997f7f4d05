"""The model-loading options (`ModelOptions`) as llama.cpp takes them: enums in the context's
parameters, and the C arrays of metadata overrides and tensor placements in the model's.

Everything llama.cpp would take badly is checked here first, against the GGUF header and ggml's
buffer types, with a message naming the setting: a metadata override of the wrong type (which
llama.cpp ignores with a log line nobody sees), a buffer type no device has, a regex that does
not compile (which would throw inside the loader), more experts than the model has. What does
not apply to this model (experts on a dense one, a pattern no tensor matches) is said as a note.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp as llama

from server.core.llama.loading.ggml_devices import device_api
from server.core.load_settings import ModelOptions
from server.core.scheduling.engine import EngineError
from server.models.gguf import gguf_summary
from server.models.memory import KvCacheLayout, kv_cache_layout

# enum ggml_type (ggml.h): the KV cache types llama-server offers.
GGML_TYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "iq4_nl": 20,
    "bf16": 30,
}
FLASH_ATTENTION = {
    "auto": llama.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}
LOAD_MODES = {
    "auto": llama.LLAMA_LOAD_MODE_AUTO,
    "none": llama.LLAMA_LOAD_MODE_NONE,
    "mmap": llama.LLAMA_LOAD_MODE_MMAP,
    "mlock": llama.LLAMA_LOAD_MODE_MLOCK,
    "mmap+mlock": llama.LLAMA_LOAD_MODE_MMAP_MLOCK,
    "dio": llama.LLAMA_LOAD_MODE_DIRECT_IO,
}
_KV_OVERRIDE_TAGS = {
    "int": llama.LLAMA_KV_OVERRIDE_TYPE_INT,
    "float": llama.LLAMA_KV_OVERRIDE_TYPE_FLOAT,
    "bool": llama.LLAMA_KV_OVERRIDE_TYPE_BOOL,
    "str": llama.LLAMA_KV_OVERRIDE_TYPE_STR,
}
# llama.cpp's LLM_FFN_EXPS_REGEX (common.h): the expert tensors --n-cpu-moe keeps on the CPU.
EXPERT_TENSORS = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
CPU_BUFFER = "CPU"


class TensorBufferOverride(ctypes.Structure):
    """`struct llama_model_tensor_buft_override` (llama.h); llama-cpp-python types the
    model parameters' pointer to these as a plain void pointer."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


@dataclass
class ModelOverrides:
    """One load's metadata overrides and tensor placements as C arrays (None: none), kept
    alive while llama.cpp reads them, and what did not apply, in words."""

    kv: Any = None
    tensors: Any = None
    notes: list[str] = field(default_factory=list)

    @property
    def hint(self) -> str:
        """Said after a load that failed with overrides given: llama.cpp's regex engine or
        its checks of the model's values may have refused one of them."""
        if self.kv is None and self.tensors is None:
            return ""
        return (
            " with the overrides asked (--overridekv, --overridetensors, --moecpu, "
            "--moeexperts): try without them"
        )

    def apply(self, params: Any) -> None:
        if self.kv is not None:
            params.kv_overrides = self.kv
        if self.tensors is not None:
            params.tensor_buft_overrides = ctypes.cast(self.tensors, ctypes.c_void_p)


def model_overrides(path: Path, options: ModelOptions) -> ModelOverrides:
    """Check and build the overrides `options` ask for this model; EngineError, naming the
    setting, for one llama.cpp would refuse, ignore or crash on."""
    summary = gguf_summary(path)
    metadata, notes = summary.metadata, list[str]()
    wanted = list(options.kv_overrides)
    experts = _expert_override(summary.architecture, metadata, options.moe_experts, notes)
    if experts is not None and experts[0] not in {key for key, _, _ in wanted}:
        wanted.append(experts)
    for key, kind, value in wanted:
        _check_override_type(key, kind, value, metadata.get(key))
    names = [tensor.name for tensor in summary.tensors]
    placements = _tensor_placements(options, names, notes)
    return ModelOverrides(_kv_array(wanted), _tensor_array(placements), notes)


def _expert_override(
    architecture: str, metadata: Any, experts: int, notes: list[str]
) -> tuple[str, str, str] | None:
    """KoboldCpp's --moeexperts as the override it is: the model's experts used per token."""
    if experts <= 0:
        return None
    available = metadata.get(f"{architecture}.expert_count")
    if not isinstance(available, int) or available <= 0:
        notes.append(f"--moeexperts {experts}: not applied, this model has no experts")
        return None
    if experts > available:
        raise EngineError(f"--moeexperts {experts}: this model has only {available} experts")
    return f"{architecture}.expert_used_count", "int", str(experts)


def _check_override_type(key: str, kind: str, value: str, stored: Any) -> None:
    """llama.cpp only logs an override of another type than the model stores, and keeps the
    model's value: refuse it instead. A key the file lacks is taken as given."""
    if stored is None or isinstance(stored, tuple):
        return
    if isinstance(stored, bool):
        expected = "bool"
    elif isinstance(stored, int):
        expected = "int"
    elif isinstance(stored, float):
        expected = "float"
    else:
        expected = "str"
    if kind != expected:
        raise EngineError(
            f"--overridekv {key}={kind}:{value}: the model stores {key} as {expected} "
            f"({stored!r}); write {key}={expected}:…"
        )


def _kv_array(overrides: Sequence[tuple[str, str, str]]) -> Any:
    """A `llama_model_kv_override` array ended by an empty key, as llama.cpp reads it."""
    if not overrides:
        return None
    array = (llama.llama_model_kv_override * (len(overrides) + 1))()
    for entry, (key, kind, value) in zip(array, overrides, strict=False):
        entry.key = key.encode()
        entry.tag = _KV_OVERRIDE_TAGS[kind]
        if kind == "int":
            entry.value.val_i64 = int(value)
        elif kind == "float":
            entry.value.val_f64 = float(value)
        elif kind == "bool":
            entry.value.val_bool = value.strip() == "true"
        else:
            entry.value.val_str = value.encode()
    return array


def _tensor_placements(
    options: ModelOptions, names: Sequence[str], notes: list[str]
) -> list[tuple[str, str]]:
    """-ot's (pattern, buffer type) pairs, then --n-cpu-moe's, each checked against the
    model's tensor names."""
    placements = list(options.tensor_overrides)
    for pattern, buffer_type in placements:
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise EngineError(f"--overridetensors {pattern}: not a valid regex ({exc})") from None
        if not any(compiled.search(name) for name in names):
            notes.append(f"--overridetensors {pattern}={buffer_type}: no tensor of this model")
    if options.moe_cpu_layers > 0:
        experts = re.compile(EXPERT_TENSORS)
        if not any(experts.search(name) for name in names):
            notes.append(f"--moecpu {options.moe_cpu_layers}: this model has no expert tensors")
        else:
            for layer in range(options.moe_cpu_layers):
                placements.append((rf"blk\.{layer}{EXPERT_TENSORS}", CPU_BUFFER))
    return placements


def buffer_types() -> dict[str, int]:
    """Each device's buffer type by ggml's name for it ("CPU", "Vulkan0", "CUDA0", …), as
    llama-server's -ot names them."""
    ggml, base = device_api()
    base.ggml_backend_dev_buffer_type.argtypes = [ctypes.c_void_p]
    base.ggml_backend_dev_buffer_type.restype = ctypes.c_void_p
    base.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
    base.ggml_backend_buft_name.restype = ctypes.c_char_p
    found: dict[str, int] = {}
    for index in range(ggml.ggml_backend_dev_count()):
        buft = base.ggml_backend_dev_buffer_type(ggml.ggml_backend_dev_get(index))
        if buft:
            found[(base.ggml_backend_buft_name(buft) or b"").decode()] = buft
    return found


def _tensor_array(placements: Sequence[tuple[str, str]]) -> Any:
    """The `llama_model_tensor_buft_override` array ended by a null pattern (patterns kept
    alive by the array's own references)."""
    if not placements:
        return None
    available = buffer_types()
    array = (TensorBufferOverride * (len(placements) + 1))()
    for entry, (pattern, buffer_type) in zip(array, placements, strict=False):
        if buffer_type not in available:
            raise EngineError(
                f"--overridetensors {pattern}={buffer_type}: no such buffer type here "
                f"(this machine has: {', '.join(available) or 'none'})"
            )
        entry.pattern = pattern.encode()
        entry.buft = available[buffer_type]
    return array


def kv_layout(options: ModelOptions) -> tuple[KvCacheLayout, str | None]:
    """The KV cache llama.cpp is asked for (a quantized V falls back to f16 when flash
    attention is off), and the note saying so."""
    return kv_cache_layout(
        options.cache_type_k, options.cache_type_v, options.flash_attention, options.offload_kv
    )


def apply_context_options(params: Any, options: ModelOptions, kv: KvCacheLayout) -> None:
    """Flash attention, the KV cache's types and place, RoPE (0: the model's own)."""
    params.flash_attn_type = FLASH_ATTENTION[options.flash_attention]
    params.type_k = GGML_TYPES[kv.type_k]
    params.type_v = GGML_TYPES[kv.type_v]
    params.offload_kqv = kv.on_device
    params.rope_freq_base = options.rope_freq_base
    params.rope_freq_scale = options.rope_freq_scale
