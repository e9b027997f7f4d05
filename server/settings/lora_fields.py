"""The LoRA settings of `HearthSettings`: KoboldCpp's `lora` (adapter files) and `loramult`
(their scale), with llama-server's `--lora`, `--lora-scaled` and `--lora-init-without-apply`
beside them (server/settings/cli.py). Kept apart so the settings model stays readable;
`HearthSettings` inherits them, so they are ordinary settings everywhere (command line, .kcpps,
launcher).

The adapters are loaded with the model and applied to every request at their scale unless a
request (llama-server's per-request `lora`) or `POST /lora-adapters` says otherwise.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, field_validator

from server.settings.flags import flags


class LoraFields(BaseModel):
    # KoboldCpp's --lora FILE [FILE ...] (a list in .kcpps; null when none) and
    # llama-server's repeatable --lora FILE.
    lora: list[str] | None = Field(
        default=None,
        description="LoRA adapter GGUF files applied on top of the model.",
        json_schema_extra=flags("--lora", nargs="+", extend=True, metavar="FILE"),
    )
    # KoboldCpp's --loramult: the scale of every `lora` file (llama-server's --lora's is 1.0).
    loramult: float = Field(
        default=1.0,
        ge=-100.0,
        le=100.0,
        description="The LoRA adapters' scale.",
        json_schema_extra=flags("--loramult", metavar="SCALE"),
    )
    # llama-server's --lora-scaled FILE SCALE (repeatable), or its newer FILE:SCALE,FILE:SCALE;
    # kept as "FILE:SCALE" items. Not a KoboldCpp key.
    lora_scaled: list[str] | None = Field(
        default=None,
        description="LoRA adapter GGUF files, each with its own scale: FILE SCALE, or "
        "FILE:SCALE[,FILE:SCALE].",
        json_schema_extra=flags("--lora-scaled", nargs="+", extend=True, metavar="FILE:SCALE"),
    )
    # llama-server's --lora-init-without-apply: loaded at scale 0 until POST /lora-adapters.
    lora_init_without_apply: bool = Field(
        default=False,
        description="Load the LoRA adapters at scale 0, to be applied by POST /lora-adapters.",
        json_schema_extra=flags("--lora-init-without-apply"),
    )
    # The adapters' scales as the server applies them now (`lora_scales_now`).
    _lora_scales: list[float] = PrivateAttr(default_factory=list)

    @field_validator("lora", mode="before")
    @classmethod
    def _lora_files(cls, value: Any) -> Any:
        # A .kcpps may hold one path as a string, a list, or "" / [] for none.
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list):
            files = [str(item).strip() for item in value if str(item).strip()]
            return files or None
        return value

    @field_validator("lora_scaled", mode="before")
    @classmethod
    def _scaled_files(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list):
            pairs = scaled_pairs([str(item) for item in value])
            return [f"{path}:{scale}" for path, scale in pairs] or None
        return value

    def lora_adapters(self) -> list[tuple[str, float]]:
        """Every adapter with the scale it is configured at, as llama-server numbers them:
        `lora`'s files (at `loramult`), then `lora_scaled`'s."""
        adapters = [(path, self.loramult) for path in self.lora or ()]
        return adapters + scaled_pairs(self.lora_scaled or [])

    def lora_scales_now(self) -> list[float]:
        """The adapters' scales as the server applies them now, one per adapter: those
        configured (0 with `lora_init_without_apply`) until POST /lora-adapters changes them.
        As llama-server changes its own parameters there, this one list (per settings object,
        shared by its copies) is changed in place: the HTTP side writes it, every model
        loaded with these settings reads it when a request starts."""
        adapters = self.lora_adapters()
        if len(self._lora_scales) != len(adapters):
            apply = not self.lora_init_without_apply
            self._lora_scales[:] = [scale if apply else 0.0 for _path, scale in adapters]
        return self._lora_scales


def scaled_pairs(items: list[str]) -> list[tuple[str, float]]:
    """(file, scale) pairs from --lora-scaled's words: `FILE SCALE` (llama-server's older
    form, two words) or `FILE:SCALE[,FILE:SCALE]` (its newer one). ValueError says why not."""
    words = [part.strip() for item in items for part in item.split(",") if part.strip()]
    pairs: list[tuple[str, float]] = []
    index = 0
    while index < len(words):
        word = words[index]
        path, _, suffix = word.rpartition(":")
        scale = _scale(suffix) if path else None
        if scale is not None:  # FILE:SCALE (a Windows drive letter's colon is no scale)
            pairs.append((path, scale))
            index += 1
            continue
        scale = _scale(words[index + 1]) if index + 1 < len(words) else None
        if scale is None:
            raise ValueError(f"--lora-scaled {word}: give a scale, as FILE SCALE or FILE:SCALE")
        pairs.append((word, scale))
        index += 2
    return pairs


def _scale(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
