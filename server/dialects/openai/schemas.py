"""OpenAI wire shapes (requests). Unknown fields are ignored, as clients send many.

Fields follow the order of the upstream reference: completions
https://platform.openai.com/docs/api-reference/completions/create, chat
https://platform.openai.com/docs/api-reference/chat/create, Responses
https://platform.openai.com/docs/api-reference/responses/create. Native KoboldAI extras that
KoboldCpp also accepts here (`top_k`, `min_p`, `repetition_penalty`, `genkey`) sit at the end.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from server.dialects.function_tools import FunctionDefinition
from server.dialects.limits import OptionalTopK, TokenCount
from server.dialects.llama.schemas import NativeCompletion, PredictedTimings, Timings
from server.dialects.sampling import Samples

# OpenAI's `n`: each choice takes a queue place of its own, so a few at most.
MAX_CHOICES = 8


class OpenAIBase(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class OpenAIStreamOptions(OpenAIBase):
    include_usage: bool = False
    # Hearth: the stream survives a dropped connection (server/dialects/resumable.py).
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
    # and `false` for a ban (server/dialects/token_bias.py checks them).
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
    temperature: Annotated[float | None, Samples("temperature")] = Field(
        default=None, ge=0.0, le=2.0
    )
    top_p: Annotated[float | None, Samples("top_p")] = Field(default=None, ge=0.0, le=1.0)
    tools: list[ResponsesTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    stream: bool = False
    stream_options: OpenAIStreamOptions | None = None  # Hearth reads `resumable` only
    # KoboldCpp extras
    top_k: Annotated[OptionalTopK, Samples("top_k")] = None
    seed: Annotated[int | None, Samples("seed")] = None
    genkey: str = ""


# -- responses -------------------------------------------------------------------------------


class CachedTokens(TypedDict):
    cached_tokens: int


class OpenAIUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: CachedTokens


class CompletionLogprobs(TypedDict):
    """The legacy completions' log-probabilities: parallel lists, one entry per token."""

    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class CompletionChoice(TypedDict):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: str | None


# llama-server's `verbose: true`: its native answer for the request (not a class body: a
# `__verbose` field there would be name-mangled).
VerboseAnswer = TypedDict("VerboseAnswer", {"__verbose": NativeCompletion}, total=False)


class Completion(VerboseAnswer):
    """/v1/completions' answer, and each chunk of its stream (`usage` on the last)."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[CompletionChoice]
    usage: NotRequired[OpenAIUsage]
    timings: NotRequired[Timings | PredictedTimings]  # llama-server's figures


class FunctionOut(TypedDict):
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCallOut(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionOut


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    refusal: None
    tool_calls: NotRequired[list[ToolCallOut]]


class TopLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprobOut(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(TypedDict):
    content: list[TokenLogprobOut]
    refusal: None


class ChatChoice(TypedDict):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None
    finish_reason: str


class ChatCompletion(VerboseAnswer):
    """/v1/chat/completions' answer."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChoice]
    usage: OpenAIUsage
    timings: Timings  # llama-server's figures


class FunctionDelta(TypedDict, total=False):
    name: str
    arguments: str


class ToolCallDelta(TypedDict):
    index: int
    id: NotRequired[str]
    type: NotRequired[Literal["function"]]
    function: FunctionDelta


class ChunkDelta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ToolCallDelta]


class ChunkChoice(TypedDict):
    index: int
    delta: ChunkDelta
    logprobs: ChatLogprobs | None
    finish_reason: str | None


class ChatCompletionChunk(VerboseAnswer):
    """One chunk of a /v1/chat/completions stream (`usage` only on the last, if asked)."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChunkChoice]
    usage: NotRequired[OpenAIUsage]
    timings: NotRequired[Timings | PredictedTimings]  # llama-server's figures


class InputTokens(TypedDict):
    """The prompt size of a chat or Responses request (`…/input_tokens`)."""

    object: Literal["response.input_tokens"]
    input_tokens: int


class ModelMeta(TypedDict):
    """llama-server's `meta` object (its field names), plus Hearth's own last three."""

    n_vocab: int
    n_ctx_train: int
    n_embd: int
    n_params: int
    size: int
    architecture: str
    quantization: str
    chat_template: bool


class ModelEntry(TypedDict):
    id: str
    object: Literal["model"]
    created: int  # the GGUF file's modification time (0 for a stand-in engine)
    owned_by: str
    meta: NotRequired[ModelMeta]  # what the GGUF header says (absent for a stand-in engine)


class ModelList(TypedDict):
    """/v1/models."""

    object: Literal["list"]
    data: list[ModelEntry]


class OutputText(TypedDict):
    type: Literal["output_text"]
    text: str
    annotations: list[Any]
    logprobs: NotRequired[list[Any]]


class MessageItem(TypedDict):
    type: Literal["message"]
    id: str
    role: Literal["assistant"]
    status: str
    content: list[OutputText]


class FunctionCallItem(TypedDict):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str
    status: str


OutputItem = MessageItem | FunctionCallItem


class ResponseError(TypedDict):
    code: str
    message: str


class IncompleteDetails(TypedDict):
    reason: str


class ReasoningTokens(TypedDict):
    reasoning_tokens: int


class InputCachedTokens(TypedDict):
    cached_tokens: int


class ResponseUsage(TypedDict):
    input_tokens: int
    input_tokens_details: InputCachedTokens
    output_tokens: int
    output_tokens_details: ReasoningTokens
    total_tokens: int


class ResponseObject(TypedDict):
    """/v1/responses' answer, and the `response` of its stream's lifecycle events."""

    id: str
    object: Literal["response"]
    created_at: int
    status: str
    model: str
    output: list[OutputItem]
    output_text: str
    error: ResponseError | None
    incomplete_details: IncompleteDetails | None
    instructions: str | None
    max_output_tokens: int | None
    parallel_tool_calls: bool
    temperature: float | None
    top_p: float | None
    tool_choice: str | dict[str, Any]
    tools: list[dict[str, Any]]
    text: dict[str, Any]
    metadata: dict[str, Any]
    usage: ResponseUsage | None


class ResponseEvent(TypedDict):
    """The fields every Responses stream event has; the rest depend on its `type`."""

    type: str
    sequence_number: int


class ResponseLifecycleEvent(ResponseEvent):
    response: ResponseObject


class ItemEvent(ResponseEvent):
    output_index: int
    item: OutputItem


class ContentPartEvent(ResponseEvent):
    item_id: str
    output_index: int
    content_index: int
    part: OutputText


class TextDeltaEvent(ResponseEvent):
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any]


class TextDoneEvent(ResponseEvent):
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Any]


class ArgumentsDeltaEvent(ResponseEvent):
    item_id: str
    output_index: int
    delta: str


class ArgumentsDoneEvent(ResponseEvent):
    item_id: str
    output_index: int
    name: str
    arguments: str


class ErrorEvent(ResponseEvent):
    code: str
    message: str
    param: None
