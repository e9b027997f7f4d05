"""Ollama wire shapes — https://github.com/ollama/ollama/blob/main/docs/api.md.

Ollama streams unless `"stream": false`. Unknown fields (keep_alive, think, images, …) are
ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.api.limits import C_INT_MAX, OptionalTopK


class OllamaBase(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class OllamaOptions(OllamaBase):
    # -1 or absent: the server's default amount
    num_predict: int | None = Field(default=None, ge=-(C_INT_MAX + 1), le=C_INT_MAX)
    temperature: float | None = Field(default=None, ge=0.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    top_k: OptionalTopK = None
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    seed: int | None = None
    stop: list[str] | None = None
    repeat_penalty: float | None = Field(default=None, gt=0.0)
    presence_penalty: float | None = None


class OllamaFunctionCall(OllamaBase):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class OllamaToolCall(OllamaBase):
    function: OllamaFunctionCall


class OllamaMessage(OllamaBase):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[OllamaToolCall] | None = None
    tool_name: str | None = None


class OllamaFunction(OllamaBase):
    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


class OllamaTool(OllamaBase):
    type: str = "function"
    function: OllamaFunction


class OllamaGenerateRequest(OllamaBase):
    """POST /api/generate."""

    model: str
    prompt: str = ""
    system: str | None = None
    raw: bool = False
    stream: bool = True
    format: str | dict[str, Any] | None = None
    options: OllamaOptions = Field(default_factory=OllamaOptions)


class OllamaChatRequest(OllamaBase):
    """POST /api/chat."""

    model: str
    messages: list[OllamaMessage] = Field(min_length=1)
    tools: list[OllamaTool] | None = None
    stream: bool = True
    format: str | dict[str, Any] | None = None
    options: OllamaOptions = Field(default_factory=OllamaOptions)


class OllamaShowRequest(OllamaBase):
    """POST /api/show."""

    model: str | None = None
    name: str | None = None
