"""The prompt cache's settings: KoboldCpp's FastForwarding and SmartCache, llama-server's
--cache-ram and --slot-save-path, and Hearth's own cache on disk and private cache. Kept apart so
the settings model stays readable; `HearthSettings` inherits them, so they are ordinary settings
everywhere (command line, .kcpps, launcher). What uses them: server/core/caching/.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from server.base.defaults import DEFAULT_CACHE_DISK_MIB, DEFAULT_CACHE_RAM_MIB
from server.settings.flags import flags


class PromptCacheFields(BaseModel):
    nofastforward: bool = Field(
        default=False,
        description="Never reuse the KV cache of a shared prompt prefix.",
        json_schema_extra=flags("--nofastforward"),
    )
    # llama-server's --cache-ram (8192 MiB there); a .kcpps file without it: the default.
    cacheram: int = Field(
        default=DEFAULT_CACHE_RAM_MIB,
        ge=0,
        le=1 << 20,
        description="MiB of memory for processed prompts kept after their slot moved on, so "
        "a returning conversation is not read again (0: off).",
        json_schema_extra=flags("--cacheram", "--cache-ram", "-cram", metavar="MiB"),
    )
    # KoboldCpp's SmartCache slot count. There 0 means off; here the cache is on by default
    # (bounded by --cacheram) and a count only bounds it further.
    smartcache: int = Field(
        default=0,
        ge=0,
        le=4096,
        description="At most this many prompts in the prompt cache (0: as many as --cacheram "
        "holds).",
        json_schema_extra=flags("--smartcache", metavar="N"),
    )
    # Hearth's own (no anchor keeps prompts across restarts by itself): docs/SERVING.md.
    cachedir: str | None = Field(
        default=None,
        description="Also keep cached prompts on disk in this folder, so conversations are "
        "warm after a restart or a model switch.",
        json_schema_extra=flags("--cachedir", metavar="DIR"),
    )
    cachedisk: int = Field(
        default=DEFAULT_CACHE_DISK_MIB,
        ge=1,
        le=1 << 24,
        description="MiB the --cachedir folder may hold for each model (least recently used "
        "files go first).",
        json_schema_extra=flags("--cachedisk", metavar="MiB"),
    )
    # Hearth's own: on a server shared by people who must not learn anything of each other's
    # prompts, not even by timing (docs/SERVING.md).
    privatecache: bool = Field(
        default=False,
        description="Reuse a cached prompt only for requests with the same API key (or, "
        "without one, from the same host).",
        json_schema_extra=flags("--privatecache"),
    )
    # llama-server's: where POST /slots/{id}?action=save|restore reads and writes; without
    # it those actions are refused, as there.
    slot_save_path: str | None = Field(
        default=None,
        description="Folder for llama-server's slot files (POST /slots/ID?action=save, "
        "restore): a slot's processed prompt kept by name.",
        json_schema_extra=flags("--slot-save-path", metavar="DIR"),
    )
