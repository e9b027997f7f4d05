"""llama-server's request and answer shapes for its native routes (tools/server/README.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict


class LlamaBase(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class TokenizeRequest(LlamaBase):
    """POST /tokenize."""

    content: str
    add_special: bool = False  # llama-server's default: no BOS
    parse_special: bool = True
    with_pieces: bool = False


class DetokenizeRequest(LlamaBase):
    """POST /detokenize."""

    tokens: list[int] = Field(default_factory=list)


class TokenPiece(TypedDict):
    id: int
    piece: str


class Tokenized(TypedDict):
    tokens: list[int] | list[TokenPiece]


class Detokenized(TypedDict):
    content: str


class AppliedTemplate(TypedDict):
    prompt: str


class Health(TypedDict):
    status: str


class Props(TypedDict):
    """GET /props: what llama-server's web UI and clients read (plus Hearth's placement)."""

    default_generation_settings: dict[str, Any]
    total_slots: int
    model_path: str
    model_alias: str
    chat_template: str
    modalities: dict[str, bool]
    build_info: str
    backend: str
    device: str | None
