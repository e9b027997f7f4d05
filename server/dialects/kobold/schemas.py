"""KoboldAI API wire shapes, as KoboldCpp documents them (koboldcpp-behaviour.md §1c).

Unknown fields are accepted and ignored, as KoboldCpp does (clients send many samplers Hearth
does not implement); fields of the wrong type or out of range are a 422.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from typing_extensions import TypedDict

from server.dialects.edge.limits import C_INT_MAX
from server.dialects.edge.sampling import Samples

MAX_STOP_SEQUENCES = 256
# Clients send `"genkey": null` for "no key".
Genkey = Annotated[str, BeforeValidator(lambda value: "" if value is None else value)]


class KoboldGenerateRequest(BaseModel):
    """POST /api/v1/generate and /api/extra/generate/stream."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    # Not KoboldCpp's: with several models, the one to run on (none: the one loaded now).
    model: str | None = None
    prompt: str = ""
    memory: str = ""
    images: list[str] | None = None  # base64 images (the model needs a projector)
    max_context_length: int | None = Field(default=None, ge=1, le=C_INT_MAX)
    max_length: int | None = Field(default=None, ge=1, le=C_INT_MAX)
    temperature: Annotated[float, Samples("temperature")] = Field(default=0.7, ge=0.0)
    top_k: Annotated[int, Samples("top_k")] = Field(default=100, ge=0, le=C_INT_MAX)
    top_p: Annotated[float, Samples("top_p")] = Field(default=0.9, ge=0.0, le=1.0)
    min_p: Annotated[float, Samples("min_p")] = Field(default=0.0, ge=0.0, le=1.0)
    rep_pen: Annotated[float, Samples("rep_pen")] = Field(default=1.0, ge=0.0)
    rep_pen_range: Annotated[int, Samples("rep_pen_range")] = Field(default=320, ge=0, le=C_INT_MAX)
    presence_penalty: Annotated[float, Samples("presence_penalty")] = 0.0
    sampler_seed: Annotated[int, Samples("seed")] = -1
    stop_sequence: list[str] | None = Field(default=None, max_length=MAX_STOP_SEQUENCES)
    trim_stop: bool = True
    ban_eos_token: bool = False
    use_default_badwordsids: bool = False
    genkey: Genkey = ""
    # Hearth: the stream survives a dropped connection (server/dialects/streams/resumable.py).
    resumable: bool = False
    # {"<token id>": bias}, clamped to ±100 as KoboldCpp does.
    logit_bias: dict[str, Any] | None = None
    # GBNF; a JSON schema (as text or an object) is turned into one, as KoboldCpp does.
    grammar: str | dict[str, Any] | None = None


class KoboldGenkeyRequest(BaseModel):
    """POST /api/extra/generate/check and /api/extra/abort: an optional genkey."""

    model_config = ConfigDict(extra="allow")

    genkey: Genkey = ""


class KoboldTokenCountRequest(BaseModel):
    """POST /api/extra/tokencount."""

    model_config = ConfigDict(extra="allow")

    prompt: str
    special: bool = True


class KoboldDetokenizeRequest(BaseModel):
    """POST /api/extra/detokenize."""

    model_config = ConfigDict(extra="allow")

    ids: list[int]
    special: bool = True


# -- responses -------------------------------------------------------------------------------


class KoboldResult(TypedDict):
    text: str
    tool_calls: list[Any]
    finish_reason: str
    logprobs: None
    prompt_tokens: int
    completion_tokens: int


class KoboldGenerateResponse(TypedDict):
    """POST /api/v1/generate."""

    results: list[KoboldResult]


class KoboldTokenData(TypedDict):
    """The data of each `message` event of /api/extra/generate/stream."""

    token: str
    finish_reason: str | None


class KoboldErrorDetail(TypedDict):
    msg: str
    type: str


class KoboldErrorData(TypedDict):
    """The data of a stream's in-band `error` event."""

    detail: KoboldErrorDetail


class KoboldCheckText(TypedDict):
    text: str


class KoboldCheckResponse(TypedDict):
    """/api/extra/generate/check: the text so far of a streaming request."""

    results: list[KoboldCheckText]


KoboldBool = Literal["true", "false"]  # KoboldCpp's strings; clients compare against them


class KoboldAbortResponse(TypedDict):
    success: KoboldBool
    done: KoboldBool


class KoboldResultText(TypedDict):
    result: str


class KoboldValue(TypedDict):
    value: int


class KoboldTokenCount(TypedDict):
    value: int
    ids: list[int]


class KoboldDetokenized(TypedDict):
    result: str
    success: bool


class KoboldPromptCache(TypedDict):
    """Hearth: the prompt cache (--cacheram, --smartcache), summed over the loaded models."""

    states: int  # prompts held now
    bytes: int  # their KV states' size
    max_bytes: int  # the bound on `bytes`
    saved: int  # since the server started, unloaded models included
    restored: int
    restored_tokens: int  # prompt tokens those restores did not have to read again
    evicted: int  # dropped for room, least recently used first
    # With --cachedir only: what the folder holds for the loaded models, and its bound.
    disk_states: NotRequired[int]
    disk_bytes: NotRequired[int]
    disk_max_bytes: NotRequired[int]


class KoboldPerf(TypedDict):
    """/api/extra/perf, KoboldCpp's fields plus Hearth's (`running` and those after it)."""

    last_process: float
    last_eval: float
    last_token_count: int
    last_input_count: int
    last_process_time: float
    last_eval_time: float
    last_process_speed: float
    last_eval_speed: float
    last_seed: int
    last_draft_success: int
    last_draft_failed: int
    total_gens: int
    total_img_gens: int
    total_tts_gens: int
    total_transcribe_gens: int
    stop_reason: int
    queue: int
    running: int
    placement: str  # Hearth: "Vulkan: every layer on Vulkan0 (…) (auto: …)", "CPU (--usecpu)"
    model: str | None  # Hearth: the model serving now (None: none loaded)
    loaded_models: list[str]  # Hearth
    loading_model: str | None  # Hearth: being loaded now; requests for it wait in `queue`
    resumable_streams: int  # Hearth: resumable streams kept (running, or awaiting a resume)
    resumable_bytes: int  # Hearth: the bytes of events they keep
    prompt_cache: KoboldPromptCache | None  # Hearth: None when the engine keeps no prompts
    idle: int
    hordeexitcounter: int
    uptime: float
    idletime: float
    quiet: bool


class KoboldVersion(TypedDict):
    """/api/extra/version: KoboldCpp's feature flags (`llm`, `admin`, `jinja` and KoboldAI
    Lite's multiplayer, websearch and savedata, as the settings turn them on) and Hearth's
    version."""

    result: str
    version: str
    server: str
    hearth_version: str
    protected: bool
    llm: bool
    txt2img: bool
    vision: bool
    audio: bool
    transcribe: bool
    multiplayer: bool
    websearch: bool
    tts: bool
    embeddings: bool
    music: bool
    savedata: bool
    admin: int
    router: bool
    guidance: bool
    jinja: bool
    mcp: bool
    backend: str  # Hearth's: where the model runs ("CPU", "Vulkan", "CUDA")
    device: str  # Hearth's: the devices holding layers ("Vulkan0 (llvmpipe …)") or "CPU"
    gpu_layers: int  # Hearth's: offloaded layers (llama.cpp's count; 0 on the CPU)


class KoboldReloadRequest(BaseModel):
    """POST /api/admin/reload_config: an entry of /api/admin/list_options."""

    model_config = ConfigDict(extra="allow")

    filename: str = Field(min_length=1)
