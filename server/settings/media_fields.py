"""The multimodal settings of `HearthSettings`: KoboldCpp's `mmproj` (the projector that lets a
model see images or hear sounds), `mmprojcpu`, `visionmintokens` / `visionmaxtokens`, with
llama-server's spellings beside them (server/settings/cli.py). Kept apart so the settings model
stays readable; `HearthSettings` inherits them, so they are ordinary settings everywhere.

The projector is loaded with the model by server/core/llama/media.py (llama.cpp's libmtmd).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator


class MediaFields(BaseModel):
    # KoboldCpp's --mmproj and llama-server's -mm / --mmproj.
    mmproj: str | None = Field(
        default=None,
        description="Multimodal projector GGUF (mmproj) that lets the model read images "
        "(or sounds) sent with a request.",
    )
    # KoboldCpp's --mmprojcpu; llama-server's --no-mmproj-offload.
    mmprojcpu: bool = Field(
        default=False, description="Keep the projector on the CPU, off the GPU."
    )
    # KoboldCpp's --visionmintokens / --visionmaxtokens, llama-server's --image-min-tokens /
    # --image-max-tokens: the bounds on an image's tokens for projectors whose count depends
    # on the image (Qwen-VL and the like); -1: the projector's own.
    visionmintokens: int = Field(
        default=-1, ge=-1, le=65536, description="Fewest tokens per image; -1: the model's."
    )
    visionmaxtokens: int = Field(
        default=-1, ge=-1, le=65536, description="Most tokens per image; -1: the model's."
    )

    @field_validator("mmproj", mode="before")
    @classmethod
    def _blank_projector_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value
