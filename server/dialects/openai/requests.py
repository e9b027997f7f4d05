"""OpenAI request bodies (the answers' shapes are schemas.py). Unknown fields are ignored, as
clients send many.

Fields follow the order of the upstream reference: completions
https://platform.openai.com/docs/api-reference/completions/create, chat
https://platform.openai.com/docs/api-reference/chat/create, Responses
https://platform.openai.com/docs/api-reference/responses/create. Native KoboldAI extras that
KoboldCpp also accepts here (`top_k`, `min_p`, `repetition_penalty`, `genkey`) sit at the end.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.dialects.chat.function_tools import FunctionDefinition
from server.dialects.chat.thinking import ReasoningFormat
from server.dialects.edge.limits import OptionalTopK, TokenCount
from server.dialects.edge.sampling import Samples
from server.dialects.routes.lora import LoraScale

# OpenAI's reasoning effort levels (its SDK's ReasoningEffort).
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]

# OpenAI's `n`: each choice takes a queue place of its own, so a few at most.
MAX_CHOICES = 8


class OpenAIBase(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class OpenAIStreamOptions(OpenAIBase):
    include_usage: bool = False
    # Hearth: the stream survives a dropped connection (server/dialects/streams/resumable.py).
    resumable: bool = False


class OpenAISamplingFields(OpenAIBase):
    temperature: Annotated[float | None, Samples("temperature")] = Field(
        default=None, ge=0.0, le=2.0
    )
    top_p: Annotated[float | None, Samples("top_p")] = Field(default=None, ge=0.0, le=1.0)
    n: int = Field(
        default=1, ge=1, le=MAX_CHOICES, description="Replies to generate, each its own request."
    )
    stream: bool = False
    stream_options: OpenAIStreamOptions | None = None
    stop: str | list[str] | None = None
    seed: Annotated[int | None, Samples("seed")] = None
    presence_penalty: Annotated[float | None, Samples("presence_penalty")] = Field(
        default=None, ge=-2.0, le=2.0
    )
    frequency_penalty: Annotated[float | None, Samples("frequency_penalty")] = Field(
        default=None, ge=-2.0, le=2.0
    )
    # {"<token id>": bias}; llama-server also takes text keys, [[token or text, bias], ...]
    # and `false` for a ban (server/dialects/chat/token_bias.py checks them).
    logit_bias: dict[str, Any] | list[Any] | None = None
    # KoboldCpp extras
    top_k: Annotated[OptionalTopK, Samples("top_k")] = None
    min_p: Annotated[float | None, Samples("min_p")] = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: Annotated[float | None, Samples("rep_pen")] = Field(default=None, gt=0.0)
    genkey: str = ""
    # llama-server extras: a GBNF grammar, or a JSON schema, the reply must follow.
    grammar: str | None = None
    json_schema: dict[str, Any] | None = None
    # llama-server extras: its `timings` in every streamed chunk, not only the last; its
    # native answer as `__verbose` (the rendered prompt included).
    timings_per_token: bool = False
    verbose: bool = False
    # llama-server extra: streamed, chunks with `prompt_progress` while the prompt is read.
    return_progress: bool = False
    # llama-server extra: this request's LoRA adapter scales (an adapter not named: 0).
    lora: list[LoraScale] | None = None

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def resumable(self) -> bool:
        return self.stream_options is not None and self.stream_options.resumable


class OpenAICompletionRequest(OpenAISamplingFields):
    """POST /v1/completions."""

    model: str | None = None
    prompt: str | list[str] = ""
    max_tokens: TokenCount | None = None
    logprobs: int | None = Field(
        default=None, ge=0, le=20, description="Alternatives reported per token."
    )


class OpenAIContentPart(OpenAIBase):
    type: str
    text: str | None = None
    # {"url": "data:image/png;base64,..."} (or the URL alone, as some clients send it)
    image_url: str | dict[str, Any] | None = None
    input_audio: dict[str, Any] | None = None  # {"data": base64, "format": "wav" | "mp3"}


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
    # An earlier reply's thought, given back (llama-server's field): templates that take it
    # show it.
    reasoning_content: str | None = None


class OpenAITool(OpenAIBase):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class OpenAIChatRequest(OpenAISamplingFields):
    """POST /v1/chat/completions."""

    model: str | None = None
    messages: list[OpenAIChatMessage] = Field(min_length=1)
    max_completion_tokens: TokenCount | None = None
    max_tokens: TokenCount | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[OpenAITool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    # llama-server's (and vLLM's) prompt ending: a final assistant message is continued unless
    # `continue_final_message` is false; `add_generation_prompt: false` opens no reply turn.
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    # llama-server's (and KoboldCpp's): variables for the chat template, over the server's
    # own (--chat-template-kwargs, --jinjathink, --reasoningeffort).
    chat_template_kwargs: dict[str, Any] | None = None
    # How much the model may think (none/minimal/low/medium: KoboldCpp's budget of 0/10/25/50 %
    # of max tokens; the template gets it as `reasoning_effort`), and llama-server's per-request
    # --reasoning-format (none: the thought stays in `content`).
    reasoning_effort: ReasoningEffort | None = None
    reasoning_format: ReasoningFormat | None = None


class ResponsesContentPart(OpenAIBase):
    type: str
    text: str | None = None
    image_url: str | None = None  # input_image's data: URI
    file_id: str | None = None  # input_image's uploaded file (there are no uploads here)


class ResponsesInputItem(OpenAIBase):
    type: str | None = None  # message (default), function_call, function_call_output, reasoning
    role: str | None = None
    content: str | list[ResponsesContentPart] | None = None
    summary: list[ResponsesContentPart] | None = None  # a reasoning item's summary
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | list[ResponsesContentPart] | None = None


class ResponsesTool(OpenAIBase):
    type: str = "function"
    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


class ResponsesReasoning(OpenAIBase):
    effort: ReasoningEffort | None = None  # as chat's reasoning_effort
    summary: str | None = None  # accepted; the thought comes whole, never summarized


class ResponsesRequest(OpenAIBase):
    """POST /v1/responses."""

    model: str | None = None
    input: str | list[ResponsesInputItem]
    instructions: str | None = None
    max_output_tokens: TokenCount | None = None
    temperature: Annotated[float | None, Samples("temperature")] = Field(
        default=None, ge=0.0, le=2.0
    )
    top_p: Annotated[float | None, Samples("top_p")] = Field(default=None, ge=0.0, le=1.0)
    tools: list[ResponsesTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    reasoning: ResponsesReasoning | None = None
    # llama-server's extra, as on chat: variables for the chat template (the request's win).
    chat_template_kwargs: dict[str, Any] | None = None
    stream: bool = False
    stream_options: OpenAIStreamOptions | None = None  # Hearth reads `resumable` only
    # llama-server extras, as on chat: `timings` on each text delta; streamed,
    # `response.in_progress` events with `prompt_progress` while the prompt is read.
    timings_per_token: bool = False
    return_progress: bool = False
    # KoboldCpp extras
    top_k: Annotated[OptionalTopK, Samples("top_k")] = None
    seed: Annotated[int | None, Samples("seed")] = None
    genkey: str = ""
