"""The model-loading settings of `HearthSettings` that make a big model fit and run fast:
KoboldCpp's keys (`quantkv`, `noflashattention`, `usemmap`, `usemlock`, `lowvram`, `ropeconfig`,
`overridekv`, `overridetensors`, `moecpu`, `moeexperts`, `nobostoken`, `genlimit`,
`gendefaults`) with llama-server's spellings beside them (server/settings/cli.py). Kept apart so
the settings model stays readable; `HearthSettings` inherits them, so they are ordinary
settings everywhere.

Where KoboldCpp's key and llama-server's flag say the same thing in different words, both are
fields and the properties at the end (`flash_attention`, `kv_cache_types`, ...) say what is
meant: the llama-server field when it is set, else KoboldCpp's. server/process/load_settings.py
hands them to the core, which applies them (server/core/llama/loading/model.py, load_options.py).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from server.settings.flags import flags
from server.settings.overrides import (
    OverrideType,
    parse_kv_overrides,
    parse_tensor_overrides,
)

# llama.cpp's KV cache types (llama-server's -ctk/-ctv list); KoboldCpp offers the first five.
KvCacheType = Literal["f16", "bf16", "q8_0", "q5_1", "q4_0", "f32", "q4_1", "q5_0", "iq4_nl"]
FlashAttention = Literal["auto", "on", "off"]
# llama.cpp's load modes (llama-server's -lm/--load-mode): how the weights are read.
LoadMode = Literal["auto", "none", "mmap", "mlock", "mmap+mlock", "dio"]

# KoboldCpp's old numbered Quantize KV choices.
_QUANTKV_NUMBERS = {0: "f16", 1: "q8_0", 2: "q4_0"}
# llama-server's is_truthy / is_falsey / is_autoy words for -fa.
_FLASH_WORDS = {
    "on": "on",
    "enabled": "on",
    "true": "on",
    "1": "on",
    "off": "off",
    "disabled": "off",
    "false": "off",
    "0": "off",
    "auto": "auto",
    "-1": "auto",
    "": "auto",
}
_KOBOLD_ROPE_BASE = 10000.0  # KoboldCpp's default base, used only with a scale given


class ModelOptionFields(BaseModel):
    # KoboldCpp's Quantize KV (1.116: a name; older files: 0, 1, 2), written back as read.
    quantkv: int | KvCacheType = Field(
        default="f16",
        description="KV cache type for K and V: f16, bf16, q8_0, q5_1 or q4_0 (KoboldCpp's "
        "0, 1, 2: f16, q8_0, q4_0); q8_0 about halves the cache. A quantized V cache needs "
        "flash attention.",
        json_schema_extra=flags("--quantkv", metavar="f16|bf16|q8_0|q5_1|q4_0"),
    )
    # llama-server's -ctk / -ctv: one half of the cache each, over --quantkv.
    cache_type_k: KvCacheType | None = Field(
        default=None,
        description="KV cache type for K alone (default: --quantkv's).",
        json_schema_extra=flags("--cache-type-k", "-ctk", metavar="TYPE"),
    )
    cache_type_v: KvCacheType | None = Field(
        default=None,
        description="KV cache type for V alone (default: --quantkv's).",
        json_schema_extra=flags("--cache-type-v", "-ctv", metavar="TYPE"),
    )
    # KoboldCpp 1.116 uses flash attention unless told not to; its older key `flashattention`
    # is read as the opposite of this one.
    noflashattention: bool = Field(
        default=False,
        description="Never use flash attention (as --flash-attn off).",
        json_schema_extra=flags("--noflashattention"),
    )
    # llama-server's -fa: set (on or off), it wins over --noflashattention.
    flash_attn: FlashAttention = Field(
        default="auto",
        description="Flash attention: on, off, or auto (on wherever the device supports it).",
        json_schema_extra=flags("--flash-attn", "-fa", metavar="on|off|auto"),
    )
    usemmap: bool = Field(
        default=False,
        description="Map the model file into memory (default: llama.cpp's choice, mapped "
        "unless a device cannot use it).",
        json_schema_extra=flags("--usemmap", "--mmap"),
    )
    usemlock: bool = Field(
        default=False,
        description="Lock the model's weights in RAM, so they are never swapped.",
        json_schema_extra=flags("--usemlock", "--mlock"),
    )
    # llama-server's -lm (this llama.cpp's spelling of --mmap, --no-mmap and --mlock).
    load_mode: LoadMode = Field(
        default="auto",
        description="How the weights are read: auto, none (read in, not mapped), mmap, mlock, "
        "mmap+mlock or dio; set, it wins over --usemmap and --usemlock.",
        json_schema_extra=flags(
            "--load-mode", "-lm", metavar="auto|none|mmap|mlock|mmap+mlock|dio"
        ),
    )
    # KoboldCpp's "No KV offload" (also its --usecuda lowvram word); llama-server's -nkvo.
    lowvram: bool = Field(
        default=False,
        description="Keep the KV cache in system memory, not on the GPU: less GPU memory, slower.",
        json_schema_extra=flags("--lowvram", "--no-kv-offload", "-nkvo"),
    )
    # KoboldCpp's RoPE config: [scale, base]; a scale of 0 leaves both to the model.
    ropeconfig: list[float] = Field(
        default_factory=lambda: [0.0, _KOBOLD_ROPE_BASE],
        description="RoPE frequency scale and base (KoboldCpp's --ropeconfig SCALE,BASE); "
        "scale 0: the model's own.",
        json_schema_extra=flags("--ropeconfig", nargs="+", metavar="SCALE"),
    )
    # llama-server's --rope-freq-base and --rope-scale (0: not given); they win over ropeconfig.
    rope_freq_base: float = Field(
        default=0.0,
        ge=0.0,
        description="RoPE base frequency (0: the model's own).",
        json_schema_extra=flags("--rope-freq-base", metavar="N"),
    )
    rope_scale: float = Field(
        default=0.0,
        ge=0.0,
        description="RoPE context scaling: a factor of N stretches positions N times (0: the "
        "model's own).",
        json_schema_extra=flags("--rope-scale", metavar="N"),
    )
    # KoboldCpp's and llama-server's KEY=TYPE:VALUE[,...] metadata overrides.
    overridekv: str = Field(
        default="",
        description="Override model metadata: KEY=TYPE:VALUE[,...] with TYPE int, float, bool "
        "or str (e.g. tokenizer.ggml.add_bos_token=bool:false).",
        json_schema_extra=flags("--overridekv", "--override-kv", metavar="KEY=TYPE:VALUE[,...]"),
    )
    # KoboldCpp's overridetensors and llama-server's -ot: where matching tensors are kept.
    overridetensors: str = Field(
        default="",
        description="Keep the weights whose name matches a regex on a buffer type: "
        "PATTERN=TYPE[,...] (e.g. exps=CPU; types as `hearth list-devices` names them).",
        json_schema_extra=flags(
            "--overridetensors", "--override-tensor", "-ot", metavar="PATTERN=TYPE[,...]"
        ),
    )
    moecpu: int = Field(
        default=0,
        ge=0,
        le=999,
        description="Keep the experts of the first N layers of a mixture-of-experts model on "
        "the CPU (999: all).",
        json_schema_extra=flags("--moecpu", "--n-cpu-moe", "-ncmoe", bare="most"),
    )
    moeexperts: int = Field(
        default=-1,
        ge=-1,
        le=512,
        description="Experts a mixture-of-experts model uses per token (-1: the model's own).",
        json_schema_extra=flags("--moeexperts"),
    )
    nobostoken: bool = Field(
        default=False,
        description="Add no BOS token to prompts (usually not wanted).",
        json_schema_extra=flags("--nobostoken"),
    )
    genlimit: int = Field(
        default=0,
        ge=0,
        le=1 << 20,
        description="Most tokens any request may generate, whatever it asks (0: no limit).",
        json_schema_extra=flags("--genlimit"),
    )
    # KoboldCpp stores it as a JSON object; the command line gives it as JSON text.
    gendefaults: dict[str, Any] = Field(
        default_factory=dict,
        description="Generation fields for requests that leave them out, as a JSON object "
        '(e.g. {"temperature": 0.5, "max_length": 300}).',
        json_schema_extra=flags("--gendefaults", metavar="JSON"),
    )
    gendefaultsoverwrite: bool = Field(
        default=False,
        description="--gendefaults win over the request's own values.",
        json_schema_extra=flags("--gendefaultsoverwrite"),
    )

    @model_validator(mode="before")
    @classmethod
    def _old_flash_attention_key(cls, data: Any) -> Any:
        # KoboldCpp reads its old `flashattention` as the opposite of `noflashattention`
        # (kept in the file, as every key is).
        if isinstance(data, dict) and "flashattention" in data and "noflashattention" not in data:
            data = {**data, "noflashattention": not _bool(data["flashattention"])}
        return data

    @field_validator("quantkv", mode="before")
    @classmethod
    def _quantkv_words(cls, value: Any) -> Any:
        if value is None:
            return "f16"
        if isinstance(value, str):
            value = value.strip().lower()
            if value.isdigit():
                value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value not in _QUANTKV_NUMBERS:
            raise ValueError("KoboldCpp's numbers are 0 (f16), 1 (q8_0) and 2 (q4_0)")
        return value

    @field_validator("cache_type_k", "cache_type_v", mode="before")
    @classmethod
    def _cache_type_word(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip().lower() or None
        return value

    @field_validator("flash_attn", mode="before")
    @classmethod
    def _flash_words(cls, value: Any) -> Any:
        if value is None:
            return "auto"
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, str):
            word = value.strip().lower()
            return _FLASH_WORDS.get(word, word)
        return value

    @field_validator("load_mode", mode="before")
    @classmethod
    def _load_mode_word(cls, value: Any) -> Any:
        if value is None:
            return "auto"
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("ropeconfig", mode="before")
    @classmethod
    def _rope_pair(cls, value: Any) -> Any:
        if value is None:
            return [0.0, _KOBOLD_ROPE_BASE]
        if isinstance(value, str):  # the command line: "0.5,20000" or "0.5 20000"
            value = [value]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            value = " ".join(value).replace(",", " ").split()  # `--ropeconfig 0.5 20000` too
        if isinstance(value, (list, tuple)):
            if not value:
                return [0.0, _KOBOLD_ROPE_BASE]
            if len(value) > 2:
                raise ValueError("give a scale and a base (SCALE,BASE), or a scale alone")
            pair = [float(part) for part in value]
            if any(part < 0 for part in pair):
                raise ValueError("the scale and the base cannot be negative")
            return pair if len(pair) == 2 else [pair[0], _KOBOLD_ROPE_BASE]
        return value

    @field_validator("overridekv", mode="before")
    @classmethod
    def _kv_overrides(cls, value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, list):  # llama-server's config files may list them
            value = ",".join(str(item) for item in value)
        if isinstance(value, str):
            return ",".join(f"{k}={t}:{v}" for k, t, v in parse_kv_overrides(value))
        return value

    @field_validator("overridetensors", mode="before")
    @classmethod
    def _tensor_overrides(cls, value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, list):
            value = ",".join(str(item) for item in value)
        if isinstance(value, str):
            return ",".join(f"{p}={t}" for p, t in parse_tensor_overrides(value))
        return value

    @field_validator("gendefaults", mode="before")
    @classmethod
    def _gendefaults_object(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}  # KoboldCpp's "" for none
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(value, dict):
            raise ValueError('must be a JSON object, such as {"temperature": 0.5}')
        return value

    # -- what the fields mean together ------------------------------------------------------

    @property
    def flash_attention(self) -> FlashAttention:
        """-fa when it says on or off, else off with --noflashattention, else auto."""
        if self.flash_attn != "auto":
            return self.flash_attn
        return "off" if self.noflashattention else "auto"

    @property
    def kv_cache_types(self) -> tuple[str, str]:
        """The K and V cache types asked for: -ctk/-ctv, else --quantkv's."""
        both = self.quantkv
        name = _QUANTKV_NUMBERS[both] if isinstance(both, int) else both
        return self.cache_type_k or name, self.cache_type_v or name

    @property
    def kv_in_system_memory(self) -> bool:
        """--lowvram, or KoboldCpp's `--usecuda lowvram` word, which says the same."""
        words: list[str] = getattr(self, "usecuda", None) or []  # HearthSettings' field
        return self.lowvram or "lowvram" in words

    @property
    def model_load_mode(self) -> LoadMode:
        """--load-mode when set, else --usemmap and --usemlock, else llama.cpp's auto."""
        if self.load_mode != "auto":
            return self.load_mode
        if self.usemmap and self.usemlock:
            return "mmap+mlock"
        if self.usemlock:
            return "mlock"
        return "mmap" if self.usemmap else "auto"

    @property
    def rope_frequencies(self) -> tuple[float, float]:
        """(base, scale) of RoPE's frequencies for llama.cpp, 0 meaning the model's own:
        --rope-freq-base and --rope-scale, else KoboldCpp's ropeconfig when its scale is set."""
        scale, base = self.ropeconfig
        if scale <= 0:
            scale, base = 0.0, 0.0
        if self.rope_freq_base > 0:
            base = self.rope_freq_base
        if self.rope_scale > 0:
            scale = 1.0 / self.rope_scale
        return base, scale

    @property
    def kv_override_list(self) -> list[tuple[str, OverrideType, str]]:
        return parse_kv_overrides(self.overridekv)

    @property
    def tensor_override_list(self) -> list[tuple[str, str]]:
        return parse_tensor_overrides(self.overridetensors)


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "on", "yes")
    return bool(value)
