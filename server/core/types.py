"""The one generation request every dialect is translated into, and the events it produces.

Plain dataclasses on purpose: the core never sees pydantic or HTTP. Dialect adapters in
`server.dialects` are the only code that knows both these types and a wire format.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass, field
from typing import Any

# One input of an embedding request: text, or token ids of the model that embeds it.
EmbedInput = str | tuple[int, ...]

# Where each of a request's media items (GenerationRequest.media) stands in its prompt: this
# text, once per item, in order. Random for each server process, so that no text a client
# types (llama.cpp's own marker is the well-known "<__media__>") can stand for an image.
MEDIA_MARKER = f"<__media_{secrets.token_hex(8)}__>"


# The most pixels an image handed to llama.cpp may have: its decoder (stb_image) holds the
# whole image, 150 MB as RGB at this size. Larger ones are scaled down at the edge first
# (server/dialects/media/image_scaling.py); the projector refuses any that is not.
MAX_DECODED_IMAGE_PIXELS = 50_000_000


@dataclass(frozen=True, slots=True)
class InfillParts:
    """What a fill-in-the-middle request (llama-server's /infill) gives around the cursor:
    each of prefix and suffix is text or token ids (or both mixed); `extra` holds other files
    as (filename, text); `prompt` is the text typed at the cursor, after the prefix."""

    prefix: str | tuple[str | int, ...]
    suffix: str | tuple[str | int, ...]
    extra: tuple[tuple[str, str], ...] = ()
    prompt: str = ""


@dataclass(frozen=True, slots=True)
class MediaInput:
    """An image or a sound a client sent, checked at the edge (server/dialects/media/media.py):
    its kind, the file's bytes as sent (PNG, JPEG, GIF, BMP; WAV, MP3, FLAC) and what they
    were found to be. The engine's projector reads them (server/core/llama/loading/media.py)."""

    kind: str  # "image" or "audio"
    data: bytes
    mime: str = ""  # e.g. "image/png", from the bytes themselves
    width: int = 0  # an image's size, read from its header (0 for audio)
    height: int = 0


class FinishReason(enum.Enum):
    """Why a generation ended. Dialect formatters map these onto their own vocabulary."""

    STOP = "stop"  # end-of-generation token, or a stop string (then `stop_sequence` is set)
    LENGTH = "length"  # hit max_length or the context limit
    CANCELLED = "cancelled"  # aborted by /abort or because the client left
    ERROR = "error"  # the engine failed; `error` says why


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """KoboldCpp's sampler fields, with its defaults (koboldcpp-behaviour.md §1c)."""

    temperature: float = 0.7
    top_k: int = 100
    top_p: float = 0.9
    min_p: float = 0.0
    rep_pen: float = 1.0
    rep_pen_range: int = 320
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0  # OpenAI's: subtracted once per earlier occurrence
    seed: int = -1  # -1: pick a random seed (reported back in perf's last_seed)
    ban_eos: bool = False
    # Added to a token's logit before sampling; -inf bans it (OpenAI's logit_bias, resolved
    # to token ids by the adapter).
    logit_bias: tuple[tuple[int, float], ...] = ()


class SlotActionKind(enum.Enum):
    SAVE = "save"
    RESTORE = "restore"
    ERASE = "erase"
    CHECK = "check"  # KoboldCpp's check_state: what the save states hold, what a save takes


@dataclass(frozen=True, slots=True)
class SlotAction:
    """What to do with one slot's KV state: to or from a file (llama-server's
    --slot-save-path) or one of the engine's in-memory save states (KoboldCpp's)."""

    kind: SlotActionKind
    slot: int
    path: str | None = None  # a checked file under --slot-save-path
    memory_slot: int | None = None  # KoboldCpp's save state number (ERASE: -1 is all)


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One request for text, whatever dialect it arrived in.

    `memory` is kept at the front of the context when the prompt has to be trimmed to fit.
    """

    request_id: str
    prompt: str
    max_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    memory: str = ""
    # The prompt as token ids, used verbatim instead of `prompt` when given (llama-server's
    # token prompts); still front-trimmed to fit the context.
    prompt_tokens: tuple[int, ...] = ()
    max_context_length: int | None = None  # None: the loaded context size
    stop: tuple[str, ...] = ()
    trim_stop: bool = True
    genkey: str = ""
    # Constrain the whole reply to this JSON schema (tool calls, JSON response formats).
    json_schema: dict[str, Any] | None = None
    # A raw GBNF grammar the reply must follow (llama-server's and KoboldAI's `grammar`);
    # `json_schema` wins when both are set.
    grammar: str | None = None
    # With a schema: first ask the model this yes/no prompt; "no" means reply freely instead.
    # (KoboldCpp's pre-poll for tool_choice "auto".)
    schema_decision_prompt: str | None = None
    # End the reply (finish_reason LENGTH, `looped`) when it repeats one short span over and
    # over: a grammar-bound tool call that loops never ends on its own (server/core/text/loops.py).
    cut_loops: bool = False
    # The catalog name of the model to run on (None: whichever is loaded, or was last).
    model: str | None = None
    # Ollama's keep_alive: seconds the model stays loaded once idle after this request
    # (0: unload at once, negative: never; None: the server's default, stay loaded).
    keep_alive: float | None = None
    # Load `model` and generate nothing (Ollama's empty prompt, KoboldCpp's admin reload);
    # with keep_alive 0 it unloads instead (`model` None: every loaded model).
    model_only: bool = False
    # Report each generated token's log-probability with this many most likely alternatives
    # (None: none; 0: the chosen token's alone). `post_sampling_probs`: probabilities after the
    # sampler chain (top-k, top-p, temperature) instead of the model's own.
    logprobs: int | None = None
    post_sampling_probs: bool = False

    # Embed these inputs instead of generating: one EmbeddingsEvent with a vector per input,
    # in order, then the outcome (`prompt` and the sampling fields are unused).
    embed_inputs: tuple[EmbedInput, ...] = ()
    # An embedding input longer than the model takes is cut to fit (Ollama's and KoboldCpp's
    # `truncate`) instead of refusing the request (OpenAI's and llama-server's rule).
    embed_truncate: bool = False
    # Rank `embed_inputs` (documents) against this query instead of embedding them: each
    # "vector" is the model's one relevance score (llama-server's /rerank).
    rank_query: str | None = None
    # Who asked, for the launcher's live view of requests (server/dialects/routes/admin_live.py):
    # the client's address and the API dialect it spoke; empty for internal requests and tests.
    client: str = ""
    dialect: str = ""
    # The name of the API key the client presented (server/dialects/edge/api_keys.py), never
    # the key: for the console's request line and the live view; "" without keys.
    key_name: str = ""
    # Whose prompt this is, for --privatecache: the key the client presented, else its host
    # (a digest, never the key itself). Cached prompts are restored only for the same owner.
    cache_owner: str = ""
    # Whose turn this is in the fair queue (server/core/scheduling/request_queue.py): the same
    # identity, a digest of the key presented, else of the client's host; "" for internal requests.
    queue_owner: str = ""
    # llama-server's `cache_prompt: false`: the prompt is read from scratch, reusing no cached
    # prefix (so that the same request gives the same logits, whatever the cache holds).
    reuse_cache: bool = True
    # A thinking model's thought (server/core/text/reasoning.py): `thinking_open` when the prompt
    # ends inside one (the template opened it), its tags, and the tokens it may take before
    # the engine writes the end tag itself and the model answers (None: no limit).
    thinking_open: bool = False
    thinking_tags: tuple[str, str] = ("<think>", "</think>")
    reasoning_budget: int | None = None
    # Generated control tokens appear in the text: gpt-oss's harmony channels are control
    # tokens (`<|channel|>`, `<|message|>`…) its reply is read by; other models' must not leak.
    render_special_tokens: bool = False
    # Hand the consumer `Progress` events while the prompt is read (llama-server's
    # `return_progress`): the stream shows "reading the prompt: 62 %" instead of silence.
    report_progress: bool = False
    # Save, restore or erase a slot's KV state instead of generating (llama-server's
    # /slots actions, KoboldCpp's admin save states): one SlotActionEvent, then the outcome.
    slot_action: SlotAction | None = None
    # The LoRA adapters' scales for this request as (adapter id, scale) pairs, every adapter
    # not named at 0 (llama-server's per-request `lora`); None: the server's scales (its
    # settings, or what POST /lora-adapters set last).
    lora: tuple[tuple[int, float], ...] | None = None
    # Images and sounds, in the order their MEDIA_MARKER stands in `prompt` (or in the chat
    # messages it was rendered from): read by the model's projector (--mmproj).
    media: tuple[MediaInput, ...] = ()
    # A prompt longer than the context: refused (llama-server's and OpenAI's way, for their
    # dialect) rather than trimmed at the front (KoboldCpp's and Ollama's).
    refuse_overflow: bool = False


@dataclass(frozen=True, slots=True)
class TokenChoice:
    """One token and its log-probability (natural log; a probability when post-sampling)."""

    token_id: int
    piece: bytes  # the token's text as bytes (may be part of a UTF-8 character)
    logprob: float


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A generated token's log-probability and the most likely alternatives at its place."""

    chosen: TokenChoice
    top: tuple[TokenChoice, ...] = ()


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """A piece of generated text: always whole UTF-8 characters, never part of a stop string.

    `token_ids` are the tokens whose text this event releases (text is held back while it
    may still become a stop string or is an incomplete character, so one event can carry
    several tokens, or none); `logprobs` has one entry per token when the request asked.
    """

    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class EmbeddingsEvent:
    """What an embedding request produced, delivered once, before its GenerationOutcome."""

    # One per input, in order, of unit length (a rank head's scores: as they are); empty when
    # nothing is pooled (--pooling none): `token_vectors` then.
    vectors: tuple[tuple[float, ...], ...]
    token_counts: tuple[int, ...]  # tokens embedded per input (after any truncation)
    decodes: int = 1  # llama.cpp decodes they took: several inputs share one
    # --pooling none: per input, each token's output vector, raw (as llama-server's /embeddings).
    token_vectors: tuple[tuple[tuple[float, ...], ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class SlotActionEvent:
    """What a slot action did, delivered once before its GenerationOutcome."""

    tokens: int  # saved, restored or erased (CHECK: what a save would keep now)
    size: int = 0  # bytes written or read (CHECK: what a save would take)
    seconds: float = 0.0
    states: tuple[tuple[int, int], ...] = ()  # CHECK: each save state's (tokens, bytes)


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """The hidden answer to `schema_decision_prompt`, delivered before the reply's first text:
    whether the reply is the schema-bound call (True) or free text (False), so that free text
    streams at once rather than being held back as a possible call."""

    call: bool


@dataclass(frozen=True, slots=True)
class GenerationOutcome:
    """The last event of every generation, with the figures the console and perf report."""

    finish_reason: FinishReason
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_seconds: float = 0.0  # prompt processing time
    generation_seconds: float = 0.0  # time spent producing completion tokens
    time_to_first_token: float | None = None  # from start of processing to the first text
    seed: int = -1
    stop_sequence: str | None = None  # the stop string that ended it, if any
    error: str | None = None
    reused_prompt_tokens: int = 0  # prompt tokens served from the KV cache
    prompt_truncated: bool = False  # the prompt's front was cut to fit the context
    constrained: bool = False  # the reply followed `json_schema` (e.g. it is a tool call)
    looped: bool = False  # ended (finish_reason LENGTH) by `cut_loops`: it repeated itself
    # Ended because the server is shutting down (finish_reason ERROR, `error` says so).
    server_stopping: bool = False
    # Refused as sent (finish_reason ERROR, `error` says why): the client's mistake, such as
    # an embedding input longer than the model takes, so an HTTP 400 rather than a 500.
    input_rejected: bool = False
    # Refused for a prompt longer than the context (`refuse_overflow`): (its tokens, the
    # context's), which llama-server's error body gives.
    context_overflow: tuple[int, int] | None = None
    # Speculative decoding (llama-server's `draft_n`, `draft_n_accepted`): draft tokens
    # decoded, those that became part of the reply, and the decodes that checked drafts.
    draft_tokens: int = 0
    draft_accepted: int = 0
    draft_steps: int = 0


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a request has got, reported by the engine after each decode it took part in.

    The scheduler reads it (the live view of requests: prompt progress for a long prompt,
    tokens so far); the request's consumer sees it only when it asked (`report_progress`),
    and then only while the prompt is read.
    """

    prompt_done: int  # prompt tokens in the context so far (a reused prefix counts)
    prompt_total: int
    generated: int  # tokens sampled so far
    cached: int = 0  # prompt tokens taken from the cache, not read
    seconds: float = 0.0  # since the request started


EngineEvent = TokenEvent | ToolDecision | EmbeddingsEvent | SlotActionEvent | GenerationOutcome
# What an engine yields: the request's events, with its progress reports among them.
EngineReport = EngineEvent | Progress
