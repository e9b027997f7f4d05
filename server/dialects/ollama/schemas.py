"""Ollama wire shapes — https://github.com/ollama/ollama/blob/main/docs/api.md.

Ollama streams unless `"stream": false`. Unknown fields are ignored.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypedDict

from server.dialects.chat.function_tools import FunctionDefinition
from server.dialects.edge.limits import C_INT_MAX, OptionalTopK
from server.dialects.edge.sampling import Samples


class OllamaBase(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class OllamaOptions(OllamaBase):
    # -1 or absent: the server's default amount
    num_predict: int | None = Field(default=None, ge=-(C_INT_MAX + 1), le=C_INT_MAX)
    temperature: Annotated[float | None, Samples("temperature")] = Field(default=None, ge=0.0)
    top_p: Annotated[float | None, Samples("top_p")] = Field(default=None, ge=0.0, le=1.0)
    top_k: Annotated[OptionalTopK, Samples("top_k")] = None
    min_p: Annotated[float | None, Samples("min_p")] = Field(default=None, ge=0.0, le=1.0)
    seed: Annotated[int | None, Samples("seed")] = None
    stop: list[str] | None = None
    repeat_penalty: Annotated[float | None, Samples("rep_pen")] = Field(default=None, gt=0.0)
    # How far back the penalties look: 0 turns them off, -1 means the whole context.
    repeat_last_n: int | None = Field(default=None, ge=-1, le=C_INT_MAX)
    presence_penalty: Annotated[float | None, Samples("presence_penalty")] = None
    frequency_penalty: Annotated[float | None, Samples("frequency_penalty")] = None
    # KoboldCpp's native field (it takes them on every endpoint; here among the options, as
    # Ollama's clients send only known fields besides them): a GBNF grammar for the reply.
    grammar: str | None = None


class OllamaFunctionCall(OllamaBase):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class OllamaToolCall(OllamaBase):
    function: OllamaFunctionCall


class OllamaMessage(OllamaBase):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    thinking: str | None = None  # an earlier reply's thought, given back
    tool_calls: list[OllamaToolCall] | None = None
    tool_name: str | None = None
    images: list[str] | None = None  # base64 images (the model needs a projector)


class OllamaTool(OllamaBase):
    type: str = "function"
    function: FunctionDefinition


_GO_LONGEST_SECONDS = (2**63 - 1) / 1e9
_PLAIN_NUMBER = re.compile(r"[-+]?[0-9]*\.?[0-9]+(e[-+]?[0-9]+)?", re.IGNORECASE)
_GO_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_GO_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def keep_alive_seconds(value: object) -> float | None:
    """Ollama's keep_alive: a number of seconds, or a Go duration ("5m", "1h30m", "-1", "0").
    Negative means never unload."""
    if value is None or isinstance(value, bool):
        return None if value is None else _bad_keep_alive(value)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _duration_seconds(value.strip())
    else:
        return _bad_keep_alive(value)
    if math.isnan(seconds):
        return _bad_keep_alive(value)
    # Past Go's longest duration (~292 years) Ollama means never; so does Hearth.
    return seconds if abs(seconds) < _GO_LONGEST_SECONDS else -1.0


def _duration_seconds(text: str) -> float:
    if _PLAIN_NUMBER.fullmatch(text):  # "0", "-1", "300": seconds, as Ollama reads them
        return float(text)
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    parts = _GO_DURATION.findall(body)
    if not body or "".join(number + unit for number, unit in parts) != body:
        return _bad_keep_alive(text)
    return sign * sum(float(number) * _GO_UNIT_SECONDS[unit] for number, unit in parts)


def _bad_keep_alive(value: object) -> float:
    raise ValueError(f'time: invalid duration "{value}" (use seconds, or e.g. "5m", "1h", "-1")')


class KeepsAlive(OllamaBase):
    # Seconds the model stays loaded once idle (0: unload at once, negative: never). Absent:
    # Hearth keeps the model loaded until another replaces it (Ollama's default is 5 minutes).
    keep_alive: float | None = None

    @field_validator("keep_alive", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float | None:
        return keep_alive_seconds(value)


# Ollama's `think`: on or off, or a level (gpt-oss's low/medium/high; on for other models).
# Absent: on for a model whose template thinks, else the text as the model writes it.
Think = bool | Literal["low", "medium", "high"] | None


class OllamaGenerateRequest(KeepsAlive):
    """POST /api/generate. An empty prompt only loads the model (unloads with keep_alive 0)."""

    model: str
    prompt: str = ""
    system: str | None = None
    images: list[str] | None = None  # base64 images for the prompt
    raw: bool = False
    stream: bool = True
    format: str | dict[str, Any] | None = None
    think: Think = None
    options: OllamaOptions = Field(default_factory=OllamaOptions)


class OllamaChatRequest(KeepsAlive):
    """POST /api/chat. No messages only loads the model (unloads with keep_alive 0)."""

    model: str
    messages: list[OllamaMessage] = Field(default_factory=list)
    tools: list[OllamaTool] | None = None
    stream: bool = True
    format: str | dict[str, Any] | None = None
    think: Think = None
    options: OllamaOptions = Field(default_factory=OllamaOptions)


class OllamaShowRequest(OllamaBase):
    """POST /api/show."""

    model: str | None = None
    name: str | None = None


class OllamaPullRequest(OllamaBase):
    """POST /api/pull: `hf.co/owner/repo[:QUANT]` names (Ollama's Hugging Face spelling)."""

    model: str | None = None
    name: str | None = None  # older clients
    insecure: bool = False  # accepted; downloads always use the hub's TLS endpoint
    stream: bool = True


class OllamaDeleteRequest(OllamaBase):
    """DELETE /api/delete."""

    model: str | None = None
    name: str | None = None


# -- responses -------------------------------------------------------------------------------


class PullProgress(TypedDict):
    """One line of /api/pull: "pulling manifest", "pulling <digest>" (with bytes), "verifying
    sha256 digest", "writing manifest", "success"."""

    status: str
    digest: NotRequired[str]
    total: NotRequired[int]
    completed: NotRequired[int]


class OllamaChunk(TypedDict):
    """The fields every streamed line (and the whole answer) has; the last one adds the
    counts and durations (nanoseconds)."""

    model: str
    created_at: str
    done: bool
    done_reason: NotRequired[str]
    total_duration: NotRequired[int]
    load_duration: NotRequired[int]
    prompt_eval_count: NotRequired[int]
    prompt_eval_duration: NotRequired[int]
    eval_count: NotRequired[int]
    eval_duration: NotRequired[int]


class GenerateChunk(OllamaChunk):
    """/api/generate: each line of the stream, or the whole answer."""

    response: str
    thinking: NotRequired[str]  # the thought (only when there is some, as Ollama)


class ToolFunctionOut(TypedDict):
    index: int
    name: str
    arguments: dict[str, Any]


class ToolCallOut(TypedDict):
    function: ToolFunctionOut


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str
    thinking: NotRequired[str]  # the thought (only when there is some, as Ollama)
    tool_calls: NotRequired[list[ToolCallOut]]


class ChatChunk(OllamaChunk):
    """/api/chat: each line of the stream, or the whole answer."""

    message: AssistantMessage


class StreamError(TypedDict):
    """A failure after the stream began (ollama-python raises ResponseError on it)."""

    error: str


class ModelDetails(TypedDict):
    format: str
    family: str
    families: list[str] | None
    parameter_size: str
    quantization_level: str
    parent_model: str


class ModelEntry(TypedDict):
    name: str
    model: str
    modified_at: str | None
    size: int
    digest: str
    details: ModelDetails
    context_length: int


class RunningModel(ModelEntry):
    expires_at: str
    size_vram: int


class ModelTags(TypedDict):
    """/api/tags."""

    models: list[ModelEntry]


class RunningModels(TypedDict):
    """/api/ps."""

    models: list[RunningModel]


class ModelShow(TypedDict):
    """/api/show."""

    modelfile: str
    parameters: str
    template: str
    details: ModelDetails
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str | None


class OllamaVersion(TypedDict):
    """/api/version: the Ollama version Hearth answers as, and its own."""

    version: str
    hearth: str
