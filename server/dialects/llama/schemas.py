"""llama-server's request and answer shapes for its native routes (tools/server/README.md).

Its completion answers and their figures are in server/dialects/routes/llama_extensions.py, since
its OpenAI answers carry them too.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from server.dialects.edge.limits import C_INT_MAX
from server.dialects.edge.sampling import Samples
from server.dialects.routes.lora import LoraScale


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


class Health(TypedDict):
    status: str


class Props(TypedDict):
    """GET /props: what llama-server's web UI and clients read (plus Hearth's placement)."""

    default_generation_settings: dict[str, Any]
    total_slots: int
    model_path: str
    model_alias: str
    endpoint_slots: bool  # GET /slots is on (off with --no-slots)
    chat_template: str
    chat_template_source: str  # Hearth's: where the template came from, in words
    thinking: bool  # Hearth's: the template shows its model thinks (a `<think>` tag, …)
    modalities: dict[str, bool]
    build_info: str
    backend: str
    device: str | None
    is_sleeping: bool  # --sleep-idle-seconds unloaded the model; the next request loads it


# A prompt as llama-server takes it: text, token ids, text and ids mixed, or an object with
# `prompt_string` (and `multimodal_data`: base64 items where its text has `<__media__>`).
PromptPart = str | int
SinglePrompt = str | list[PromptPart] | dict[str, Any]


class CompletionRequest(LlamaBase):
    """POST /completion (llama-server's native completion), with llama-server's defaults."""

    model: str | None = None
    # One prompt, or a list of prompts (then the answer is a list).
    prompt: SinglePrompt | list[SinglePrompt] = ""
    n_predict: int = Field(
        default=-1, ge=-1, le=C_INT_MAX, description="-1: the server's default amount"
    )
    stream: bool = False
    stop: list[str] | None = None
    temperature: Annotated[float, Samples("temperature")] = Field(default=0.8, ge=0.0)
    top_k: Annotated[int, Samples("top_k")] = Field(default=40, ge=0, le=C_INT_MAX)
    top_p: Annotated[float, Samples("top_p")] = Field(default=0.95, ge=0.0, le=1.0)
    min_p: Annotated[float, Samples("min_p")] = Field(default=0.05, ge=0.0, le=1.0)
    seed: Annotated[int, Samples("seed")] = Field(default=-1, ge=-(C_INT_MAX + 1), le=2**32 - 1)
    repeat_penalty: Annotated[float, Samples("rep_pen")] = Field(default=1.0, ge=0.0)
    repeat_last_n: int = Field(default=64, ge=-1, le=C_INT_MAX)
    presence_penalty: Annotated[float, Samples("presence_penalty")] = 0.0
    frequency_penalty: Annotated[float, Samples("frequency_penalty")] = 0.0
    ignore_eos: bool = False
    logit_bias: dict[str, Any] | list[Any] | None = None
    n_probs: int = Field(default=0, ge=0, le=100)
    post_sampling_probs: bool = False
    grammar: str | None = None
    json_schema: dict[str, Any] | None = None
    return_tokens: bool = False
    response_fields: list[str] | None = None
    cache_prompt: bool = True  # false: the prompt is read from scratch, no cached prefix
    # Streamed: chunks with `prompt_progress` while the prompt is read (ignored unstreamed).
    return_progress: bool = False
    # Streamed: `timings` on every event, the figures so far (llama-server's).
    timings_per_token: bool = False
    # This request's LoRA adapter scales; an adapter not named is at 0 (None: the server's).
    lora: list[LoraScale] | None = None
