"""OpenAI wire shapes (requests). Unknown fields are ignored, as clients send many.

Fields follow the order of the upstream reference: completions
https://platform.openai.com/docs/api-reference/completions/create, chat
https://platform.openai.com/docs/api-reference/chat/create, Responses
https://platform.openai.com/docs/api-reference/responses/create. Native KoboldAI extras that
KoboldCpp also accepts here (`top_k`, `min_p`, `repetition_penalty`, `genkey`) sit at the end.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.api.limits import OptionalTopK, TokenCount


class OpenAIBase(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class OpenAIStreamOptions(OpenAIBase):
    include_usage: bool = False


class OpenAISamplingFields(OpenAIBase):
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=1, description="Only one choice per request.")
    stream: bool = False
    stream_options: OpenAIStreamOptions | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    # KoboldCpp extras
    top_k: OptionalTopK = None
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    genkey: str = ""

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class OpenAICompletionRequest(OpenAISamplingFields):
    """POST /v1/completions."""

    model: str | None = None
    prompt: str | list[str] = ""
    max_tokens: TokenCount | None = None


class OpenAIContentPart(OpenAIBase):
    type: str
    text: str | None = None


class OpenAIFunctionCall(OpenAIBase):
    name: str
    arguments: str | dict[str, Any] = "{}"


class OpenAIToolCallIn(OpenAIBase):
    id: str = ""
    type: str = "function"
    function: OpenAIFunctionCall


class OpenAIChatMessage(OpenAIBase):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[OpenAIContentPart] | None = None
    name: str | None = None
    tool_calls: list[OpenAIToolCallIn] | None = None
    tool_call_id: str | None = None


class OpenAIFunction(OpenAIBase):
    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


class OpenAITool(OpenAIBase):
    type: Literal["function"] = "function"
    function: OpenAIFunction


class OpenAIChatRequest(OpenAISamplingFields):
    """POST /v1/chat/completions."""

    model: str | None = None
    messages: list[OpenAIChatMessage] = Field(min_length=1)
    max_completion_tokens: TokenCount | None = None
    max_tokens: TokenCount | None = None
    tools: list[OpenAITool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


class ResponsesContentPart(OpenAIBase):
    type: str
    text: str | None = None


class ResponsesInputItem(OpenAIBase):
    type: str | None = None  # message (default), function_call, function_call_output
    role: str | None = None
    content: str | list[ResponsesContentPart] | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | list[ResponsesContentPart] | None = None


class ResponsesTool(OpenAIBase):
    type: str = "function"
    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


class ResponsesRequest(OpenAIBase):
    """POST /v1/responses."""

    model: str | None = None
    input: str | list[ResponsesInputItem]
    instructions: str | None = None
    max_output_tokens: TokenCount | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    tools: list[ResponsesTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    stream: bool = False
    # KoboldCpp extras
    top_k: OptionalTopK = None
    seed: int | None = None
    genkey: str = ""
