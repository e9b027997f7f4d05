"""OpenAI answer shapes: completions, chat completions (and their stream chunks), the model
list, and Responses (and its stream events), as formatter.py and responses.py write them.

llama-server's additions (`timings`, `__verbose`) are its own shapes
(server/dialects/routes/llama_extensions.py); `prompt_progress` (`return_progress`) is here.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from server.dialects.routes.llama_extensions import (
    NativeCompletion,
    PredictedTimings,
    PromptProgress,
    Timings,
)


class CachedTokens(TypedDict):
    cached_tokens: int


class ReasoningTokens(TypedDict):
    reasoning_tokens: int  # the reply's tokens that went to its thought


class OpenAIUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: CachedTokens
    completion_tokens_details: ReasoningTokens


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
    prompt_progress: NotRequired[PromptProgress]  # llama-server's, streamed when asked


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
    reasoning_content: NotRequired[str]  # the thought (llama-server's field), when there is one
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
    reasoning_content: str  # a piece of the thought
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
    prompt_progress: NotRequired[PromptProgress]  # llama-server's, streamed when asked


class InputTokens(TypedDict):
    """The prompt size of a chat or Responses request (`…/input_tokens`)."""

    object: Literal["response.input_tokens"]
    input_tokens: int


class AppliedTemplate(TypedDict):  # llama-server's /apply-template: a chat body's prompt
    prompt: str


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


class ReasoningText(TypedDict):
    type: Literal["reasoning_text"]
    text: str


class ReasoningItem(TypedDict):
    """The thought, before the message it led to (the whole of it: no summary)."""

    type: Literal["reasoning"]
    id: str
    summary: list[Any]
    content: list[ReasoningText]
    status: str


OutputItem = MessageItem | FunctionCallItem | ReasoningItem


class ResponseError(TypedDict):
    code: str
    message: str


class IncompleteDetails(TypedDict):
    reason: str


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
    # llama-server's, beside `response`: its figures in `response.completed`; how far the
    # prompt is read in `response.in_progress` (`return_progress`).
    timings: NotRequired[Timings]
    prompt_progress: NotRequired[PromptProgress]


class ItemEvent(ResponseEvent):
    output_index: int
    item: OutputItem


class ContentPartEvent(ResponseEvent):
    item_id: str
    output_index: int
    content_index: int
    part: OutputText | ReasoningText


class TextDeltaEvent(ResponseEvent):
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any]
    timings: NotRequired[Timings | PredictedTimings]  # llama-server's, `timings_per_token`


class TextDoneEvent(ResponseEvent):
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Any]


class ReasoningDeltaEvent(ResponseEvent):
    """response.reasoning_text.delta"""

    item_id: str
    output_index: int
    content_index: int
    delta: str


class ReasoningDoneEvent(ResponseEvent):
    """response.reasoning_text.done"""

    item_id: str
    output_index: int
    content_index: int
    text: str


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
