"""KoboldAI API wire shapes, as KoboldCpp documents them (koboldcpp-behaviour.md §1c).

Unknown fields are accepted and ignored, as KoboldCpp does (clients send many samplers Hearth
does not implement); fields of the wrong type or out of range are a 422.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from server.api.limits import C_INT_MAX

MAX_STOP_SEQUENCES = 256


class KoboldGenerateRequest(BaseModel):
    """POST /api/v1/generate and /api/extra/generate/stream."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    prompt: str = ""
    memory: str = ""
    max_context_length: int | None = Field(default=None, ge=1, le=C_INT_MAX)
    max_length: int | None = Field(default=None, ge=1, le=C_INT_MAX)
    temperature: float = Field(default=0.7, ge=0.0)
    top_k: int = Field(default=100, ge=0, le=C_INT_MAX)
    top_p: float = Field(default=0.9, ge=0.0, le=1.0)
    min_p: float = Field(default=0.0, ge=0.0, le=1.0)
    rep_pen: float = Field(default=1.0, ge=0.0)
    rep_pen_range: int = Field(default=320, ge=0, le=C_INT_MAX)
    presence_penalty: float = 0.0
    sampler_seed: int = -1
    stop_sequence: list[str] | None = Field(default=None, max_length=MAX_STOP_SEQUENCES)
    trim_stop: bool = True
    ban_eos_token: bool = False
    use_default_badwordsids: bool = False
    genkey: str = ""

    @field_validator("genkey", mode="before")
    @classmethod
    def _genkey_may_be_null(cls, value: object) -> object:
        return "" if value is None else value


class KoboldGenkeyRequest(BaseModel):
    """POST /api/extra/generate/check and /api/extra/abort: an optional genkey."""

    model_config = ConfigDict(extra="allow")

    genkey: str = ""

    @field_validator("genkey", mode="before")
    @classmethod
    def _genkey_may_be_null(cls, value: object) -> object:
        return "" if value is None else value


class KoboldTokenCountRequest(BaseModel):
    """POST /api/extra/tokencount."""

    model_config = ConfigDict(extra="allow")

    prompt: str
    special: bool = True


class KoboldDetokenizeRequest(BaseModel):
    """POST /api/extra/detokenize."""

    model_config = ConfigDict(extra="allow")

    ids: list[int]
    special: bool = True
