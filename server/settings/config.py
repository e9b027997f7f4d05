"""The one settings model behind the command line, `.kcpps` files and the launcher.

Field names are KoboldCpp's argparse destinations, which are also its `.kcpps` keys, so a file
moves between KoboldCpp and Hearth in both directions. Keys Hearth does not use are kept
(`extra="allow"`) and written back unchanged. Import-light on purpose: the launcher imports this
module without pulling in the engine.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from server.base.defaults import (
    DEFAULT_BATCH,
    DEFAULT_CONTEXT_SIZE,
    DEFAULT_MULTIUSER,
)
from server.base.netcheck import is_loopback
from server.settings.cache_fields import PromptCacheFields
from server.settings.device_fields import DeviceFields
from server.settings.flags import flags
from server.settings.lite_fields import LiteFields
from server.settings.lora_fields import LoraFields
from server.settings.media_fields import MediaFields
from server.settings.model_fields import ModelOptionFields
from server.settings.network_fields import NetworkFields
from server.settings.speculation_fields import SpeculationFields
from server.settings.template_fields import ChatTemplateFields
from server.settings.tool_fields import ToolFields

DEFAULT_PORT = 5001
LOOPBACK_HOST = "127.0.0.1"


class HearthSettings(  # the groups in the order --help lists them, after the fields here
    DeviceFields,
    PromptCacheFields,
    ChatTemplateFields,
    ModelOptionFields,
    SpeculationFields,
    MediaFields,
    LoraFields,
    NetworkFields,
    ToolFields,
    LiteFields,
):
    """Everything that shapes a running server. Defaults follow KoboldCpp unless noted. Groups
    of fields live in modules of their own, server/settings/*_fields.py (docs/ARCHITECTURE.md)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    model_param: str | None = Field(
        default=None,
        description="Path of the GGUF text model; none serves the bundled model.",
        json_schema_extra=flags("--model", metavar="PATH|URL"),
    )
    # llama-server's -hf: a Hugging Face repository and quantization, downloaded once.
    hf: str | None = Field(
        default=None,
        description="Serve owner/repo[:QUANT] from Hugging Face (default quant Q4_K_M).",
        json_schema_extra=flags("--hf", "-hf", metavar="OWNER/REPO[:QUANT]"),
    )
    # Several models (issue 12, in progress): a folder of GGUFs a request's `model` picks from.
    modeldir: str | None = Field(
        default=None,
        description="Also serve every GGUF in this folder; a request's model picks.",
        json_schema_extra=flags("--modeldir", metavar="DIR"),
    )
    defaultmodel: str | None = Field(
        default=None,
        description="With --modeldir: the model serving names that match none.",
        json_schema_extra=flags("--defaultmodel", metavar="NAME"),
    )
    maxloadedmodels: int = Field(
        default=1,
        ge=1,
        le=8,
        description="Models kept loaded at once (least recently used go).",
        json_schema_extra=flags("--maxloadedmodels"),
    )
    # llama-server's -a/--alias and --tags: names and labels of the served model.
    alias: str | None = Field(
        default=None,
        description="Other names of the served model, comma-separated: requests may use any; "
        "the first in alphabetical order is its id in /v1/models and /props.",
        json_schema_extra=flags("--alias", "-a", metavar="NAME[,NAME]"),
    )
    tags: str | None = Field(
        default=None,
        description="Labels /models lists on the served model, comma-separated.",
        json_schema_extra=flags("--tags", metavar="TAG[,TAG]"),
    )
    # llama-server's --sleep-idle-seconds: the memory back while nobody asks for anything.
    sleep_idle_seconds: float = Field(
        default=-1,
        ge=-1,
        le=31_536_000,
        description="Unload the models after this many seconds without a request (sleep); the "
        "next request loads them again (-1: never).",
        json_schema_extra=flags("--sleep-idle-seconds", metavar="SECONDS"),
    )
    # KoboldCpp's --embeddingsmodel: embedding requests use this GGUF instead of the chat model.
    embeddingsmodel: str | None = Field(
        default=None,
        description="GGUF model for the embeddings routes (none: the chat model embeds).",
        json_schema_extra=flags("--embeddingsmodel", metavar="FILE"),
    )
    # llama-server's --pooling (None: the model's own, else the mean).
    pooling: Literal["none", "mean", "cls", "last", "rank"] | None = Field(
        default=None,
        description="Pooling of the embeddings routes: none (a vector per token, on "
        "/embeddings only), mean, cls, last or rank; default: the model's own.",
        json_schema_extra=flags("--pooling"),
    )
    # llama-server's --rerank/--reranking (a key of Hearth's own in a .kcpps).
    rerank: bool = Field(
        default=False,
        description="Serve /v1/rerank (llama-server's) with the embeddings model, else the chat "
        "model: a reranker GGUF (with a rank head) gives relevance scores.",
        json_schema_extra=flags("--rerank", "--reranking"),
    )
    # llama-server's --spm-infill: /infill's suffix before its prefix, as some models learnt.
    spm_infill: bool = Field(
        default=False,
        description="/infill prompts in suffix-prefix-middle order (default prefix-suffix-middle).",
        json_schema_extra=flags("--spm-infill"),
    )
    # KoboldCpp's admin mode: /api/admin/list_options and /api/admin/reload_config switch the
    # model of a running server (Hearth switches in place instead of restarting).
    admin: bool = Field(
        default=False,
        description="Allow switching models over the admin API.",
        json_schema_extra=flags("--admin"),
    )
    admindir: str | None = Field(
        default=None,
        description="Folder of .kcpps files and GGUFs the admin API may load (default: "
        "--modeldir).",
        json_schema_extra=flags("--admindir", metavar="DIR"),
    )
    adminpassword: str | None = Field(
        default=None,
        description="Bearer key the admin API asks for (none: the --password, if one is set).",
        json_schema_extra=flags("--adminpassword", metavar="PASSWORD"),
    )
    host: str = Field(
        default="",
        description="Interface to listen on. Empty means loopback only (KoboldCpp: all).",
        json_schema_extra=flags("--host"),
    )
    port_param: int = Field(
        default=DEFAULT_PORT,
        ge=1,
        le=65535,
        description="TCP port.",
        json_schema_extra=flags("--port"),
    )
    contextsize: int = Field(
        default=DEFAULT_CONTEXT_SIZE,
        ge=256,
        le=262144,
        description="Context in tokens.",
        json_schema_extra=flags("--contextsize"),
    )

    multiuser: int = Field(
        default=DEFAULT_MULTIUSER,
        ge=0,
        le=1000,
        description="Requests in flight, the running one included.",
        json_schema_extra=flags("--multiuser", bare="default"),
    )
    parallelrequests: int = Field(
        default=1,
        ge=0,
        le=32,
        description="Requests generated together (batching).",
        json_schema_extra=flags("--parallelrequests"),
    )
    batchsize: int = Field(
        default=DEFAULT_BATCH,
        ge=-1,
        le=4096,
        description="Prompt tokens per decode.",
        json_schema_extra=flags("--batchsize"),
    )
    password: str | None = Field(
        default=None,
        description="Bearer key for the text APIs.",
        json_schema_extra=flags("--password", metavar="PASSWORD"),
    )
    maxrequestsize: int = Field(
        default=32,
        ge=1,
        le=1024,
        description="Largest request body in MB; larger ones are refused with 413.",
        json_schema_extra=flags("--maxrequestsize", metavar="MB"),
    )
    defaultgenamt: int = Field(
        default=1536,
        ge=1,
        le=16384,
        description="Tokens to generate when a request omits it.",
        json_schema_extra=flags("--defaultgenamt"),
    )
    quiet: bool = Field(
        default=False,
        description="Hide prompts and outputs in the console.",
        json_schema_extra=flags("--quiet"),
    )
    # llama-server's --seed. KoboldCpp has none (each request may send its own), so `seed` is a
    # key of Hearth's own in a .kcpps file; a file without it means a random seed per request.
    seed: int = Field(
        default=-1,
        ge=-1,
        le=2**31 - 1,
        description="Sampling seed of requests that set none (-1: a random one for each).",
        json_schema_extra=flags("--seed"),
    )
    # Hearth's own: how long a resumable stream's generation outlives its connection
    # (server/dialects/streams/resumable.py). Not a KoboldCpp key: a file without it means 30.
    resumegrace: int = Field(
        default=30,
        ge=0,
        le=3600,
        description="Seconds a resumable stream keeps generating after its client dropped.",
        json_schema_extra=flags("--resumegrace", metavar="SECONDS"),
    )
    # llama-server's --metrics. KoboldCpp has no such setting, so `metrics` is a key of
    # Hearth's own in a .kcpps file; a file without it means off.
    metrics: bool = Field(
        default=False,
        description="Serve Prometheus metrics at /metrics (llama-server's names).",
        json_schema_extra=flags("--metrics"),
    )
    # llama-server's --no-slots: GET /slots answers 501, as there.
    no_slots: bool = Field(
        default=False,
        description="Turn off GET /slots (the slots' state).",
        json_schema_extra=flags("--no-slots"),
    )
    # llama-server's --verbose, as far as clients see it (a key of Hearth's own in a .kcpps).
    verbose: bool = Field(
        default=False,
        description="Every OpenAI answer carries `__verbose` (llama-server's native answer, "
        "with the rendered prompt), as if each request asked `verbose: true`.",
        json_schema_extra=flags("--verbose", "-v"),
    )
    noshift: bool = Field(
        default=False,
        description="No ContextShift: recompute a trimmed long chat instead of shifting it.",
        json_schema_extra=flags("--noshift"),
    )
    jinja: bool = Field(
        default=False,
        description="KoboldCpp compatibility: the model's own chat template is always used "
        "when it has one.",
        json_schema_extra=flags("--jinja"),
    )
    # KoboldCpp's "Jinja for Tools" (off by default there). On by default here: a model whose
    # template takes tools in a format Hearth knows gets them through its template and its
    # calls are parsed live; any other model is unaffected (docs/MODELS.md, "Tool calls").
    # --nojinjatools, or a .kcpps saying false (as KoboldCpp writes unless the box is ticked),
    # makes every tool call the KoboldCpp way; a file without the key keeps the default.
    jinja_tools: bool = Field(
        default=True,
        description="Tool calls in the model's own format when Hearth knows it: the template "
        "gets the tools and the calls stream live (default on).",
        json_schema_extra=flags(
            "--jinjatools",
            "--jinja_tools",
            off=(
                "--nojinjatools",
                "Tool calls the KoboldCpp way for every model (the tools in the system text, "
                "the reply bound to a JSON schema), even one with a tool-call format of its own",
            ),
        ),
    )
    # llama-server's --reasoning-format: how a thinking model's thought is told from its
    # answer (docs/MODELS.md); requests may say otherwise (`reasoning_format`).
    reasoning_format: Literal["none", "deepseek", "auto"] = Field(
        default="auto",
        description="Split a thinking model's thought from its answer: auto or deepseek "
        "(<think> tags, harmony channels), none (leave it in the text).",
        json_schema_extra=flags("--reasoning-format", metavar="none|deepseek|auto"),
    )
    # llama-server's --reasoning-budget: -1 unrestricted, 0 no thinking.
    reasoning_budget: int = Field(
        default=-1,
        ge=-1,
        le=1 << 20,
        description="Tokens a thought may take before the server closes it and the model "
        "answers (-1: no limit, 0: no thinking).",
        json_schema_extra=flags("--reasoning-budget", metavar="N"),
    )
    launch: bool = Field(
        default=False,
        description="The launcher opens the server's page once it is ready.",
        json_schema_extra=flags("--launch"),
    )
    skiplauncher: bool = Field(
        default=False,
        description="Never open the launcher window.",
        json_schema_extra=flags("--skiplauncher"),
    )
    showgui: bool = Field(
        default=False,
        description="Open the launcher even with a model set.",
        json_schema_extra=flags("--showgui"),
    )

    @classmethod
    def bounds(cls, name: str) -> tuple[int | None, int | None]:
        """The (minimum, maximum) a numeric setting allows, as its field states them; the
        command line's help and the launcher's fields take them from here."""
        lower = upper = None
        for constraint in cls.model_fields[name].metadata:
            lower = getattr(constraint, "ge", lower)
            upper = getattr(constraint, "le", upper)
        return lower, upper

    @field_validator(
        "model_param",
        "password",
        "hf",
        "modeldir",
        "defaultmodel",
        "admindir",
        "adminpassword",
        "embeddingsmodel",
        "rpc",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # KoboldCpp writes "" as often as null for "not set".
        if isinstance(value, str) and not value.strip():
            return None
        return value.strip() if isinstance(value, str) else value

    @field_validator("host", mode="before")
    @classmethod
    def _strip_host(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else ("" if value is None else value)

    @property
    def listen_host(self) -> str:
        """The address to bind (the first of --host's): an empty host means loopback, safer
        than KoboldCpp's default."""
        return self.listen_hosts[0]

    @property
    def listen_hosts(self) -> list[str]:
        """Every address to bind: llama-server's --host takes several, comma-separated."""
        return [part.strip() for part in self.host.split(",") if part.strip()] or [LOOPBACK_HOST]

    @property
    def alias_list(self) -> list[str]:
        """--alias's names, sorted and once each (llama-server keeps them in a std::set)."""
        return sorted({part.strip() for part in (self.alias or "").split(",") if part.strip()})

    @property
    def tag_list(self) -> list[str]:
        return sorted({part.strip() for part in (self.tags or "").split(",") if part.strip()})

    @property
    def exposed_without_password(self) -> bool:
        """True when other machines could reach the server and no key guards it."""
        guarded = self.password or self.api_key or self.api_key_file
        return not all(is_loopback(host) for host in self.listen_hosts) and not guarded

    @property
    def admin_folder(self) -> str | None:
        """KoboldCpp's --admindir when --admin is on; Hearth's default is the model folder."""
        if not self.admin:
            return None
        return self.admindir or self.modeldir

    @property
    def max_request_bytes(self) -> int:
        return self.maxrequestsize * 1024 * 1024

    @property
    def batch_size(self) -> int:
        """Tokens per decode call (llama.cpp's n_batch): --batchsize, else llama.cpp's 512."""
        return self.batchsize if self.batchsize > 0 else DEFAULT_BATCH

    def to_kcpps(self) -> dict[str, Any]:
        """The `.kcpps` JSON object: known keys plus every unknown key read from a file."""
        data = self.model_dump(mode="json")
        data.setdefault("istemplate", False)
        return data
