"""Anthropic Messages wire shapes — https://docs.anthropic.com/en/api/messages.

Unknown fields (metadata, service_tier, …) are ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from server.dialects.edge.limits import OptionalTopK, TokenCount
from server.dialects.edge.sampling import Samples


class AnthropicBase(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class AnthropicBlock(AnthropicBase):
    """A content block: text, tool_use, tool_result, thinking (others are ignored)."""

    type: str
    text: str | None = None
    thinking: str | None = None  # a thinking block's thought, given back
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: str | list[AnthropicBase] | None = None
    # an image block's {"type": "base64", "media_type": "image/png", "data": ...}
    source: dict[str, Any] | None = None


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


class AnthropicThinking(AnthropicBase):
    """`thinking`: enabled with a budget of tokens, disabled, or adaptive (no budget)."""

    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(default=None, ge=0)


class AnthropicOutputFormat(AnthropicBase):
    """`output_config.format`: the reply is JSON valid for `schema` (structured outputs)."""

    type: Literal["json_schema"]
    # `schema` is a name BaseModel has: the field takes it as its alias.
    json_schema: dict[str, Any] = Field(alias="schema")


class AnthropicOutputConfig(AnthropicBase):
    """`output_config`: the reply's format (its `effort` is a hosted model's, not used)."""

    format: AnthropicOutputFormat | None = None


class AnthropicMessagesRequest(AnthropicBase):
    """POST /v1/messages."""

    model: str | None = None
    max_tokens: TokenCount
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[AnthropicBlock] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: Annotated[float | None, Samples("temperature")] = Field(
        default=None, ge=0.0, le=1.0
    )
    top_p: Annotated[float | None, Samples("top_p")] = Field(default=None, ge=0.0, le=1.0)
    top_k: Annotated[OptionalTopK, Samples("top_k")] = None
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None
    thinking: AnthropicThinking | None = None
    output_config: AnthropicOutputConfig | None = None
    # The structured-outputs beta's spelling of `output_config.format`, still sent by older
    # clients; `output_config.format` wins when both are given.
    output_format: AnthropicOutputFormat | None = None
    # KoboldCpp's native field, which it takes on every endpoint: a GBNF grammar the reply
    # must follow.
    grammar: str | None = None


class AnthropicCountTokensRequest(AnthropicBase):
    """POST /v1/messages/count_tokens."""

    model: str | None = None
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[AnthropicBlock] | None = None
    tools: list[AnthropicTool] | None = None
    output_config: AnthropicOutputConfig | None = None
    output_format: AnthropicOutputFormat | None = None


# -- responses -------------------------------------------------------------------------------


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    # Anthropic's proof the thought is its own; a local model has none (llama-server's "" too),
    # but the SDK needs the field.
    signature: str


ContentBlock = TextBlock | ToolUseBlock | ThinkingBlock


class AnthropicUsage(TypedDict):
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: NotRequired[int]


class AnthropicMessageObject(TypedDict):
    """/v1/messages' answer, and (empty) inside a stream's message_start."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ContentBlock]
    stop_reason: str | None
    stop_sequence: str | None
    usage: AnthropicUsage


class InputTokenCount(TypedDict):
    """/v1/messages/count_tokens."""

    input_tokens: int


class MessageStart(TypedDict):
    type: Literal["message_start"]
    message: AnthropicMessageObject


class ContentBlockStart(TypedDict):
    type: Literal["content_block_start"]
    index: int
    content_block: ContentBlock


class TextDeltaBody(TypedDict):
    type: Literal["text_delta"]
    text: str


class InputJSONDelta(TypedDict):
    type: Literal["input_json_delta"]
    partial_json: str


class ThinkingDelta(TypedDict):
    type: Literal["thinking_delta"]
    thinking: str


class SignatureDelta(TypedDict):
    type: Literal["signature_delta"]
    signature: str


class ContentBlockDelta(TypedDict):
    type: Literal["content_block_delta"]
    index: int
    delta: TextDeltaBody | InputJSONDelta | ThinkingDelta | SignatureDelta


class ContentBlockStop(TypedDict):
    type: Literal["content_block_stop"]
    index: int


class StopDetails(TypedDict):
    stop_reason: str
    stop_sequence: str | None


class MessageDelta(TypedDict):
    type: Literal["message_delta"]
    delta: StopDetails
    usage: AnthropicUsage


class MessageStop(TypedDict):
    type: Literal["message_stop"]


class Ping(TypedDict):
    """Anthropic's keep-alive event, sent while the stream is silent."""

    type: Literal["ping"]


StreamEvent = (
    MessageStart
    | ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
    | Ping
)
