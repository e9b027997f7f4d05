"""Anthropic Messages wire shapes — https://docs.anthropic.com/en/api/messages.

Unknown fields (metadata, thinking, service_tier, …) are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.api.limits import OptionalTopK, TokenCount


class AnthropicBase(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class AnthropicBlock(AnthropicBase):
    """A content block: text, tool_use, tool_result (others are ignored)."""

    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: str | list[AnthropicBase] | None = None


class AnthropicMessage(AnthropicBase):
    role: Literal["user", "assistant"]
    content: str | list[AnthropicBlock]


class AnthropicTool(AnthropicBase):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class AnthropicToolChoice(AnthropicBase):
    type: Literal["auto", "any", "tool", "none"] = "auto"
    name: str | None = None


class AnthropicMessagesRequest(AnthropicBase):
    """POST /v1/messages."""

    model: str | None = None
    max_tokens: TokenCount
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[AnthropicBlock] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    top_k: OptionalTopK = None
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None


class AnthropicCountTokensRequest(AnthropicBase):
    """POST /v1/messages/count_tokens."""

    model: str | None = None
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[AnthropicBlock] | None = None
    tools: list[AnthropicTool] | None = None
