"""The multimodal settings of `HearthSettings`: KoboldCpp's `mmproj` (the projector that lets a
model see images or hear sounds), `mmprojcpu`, `visionmintokens` / `visionmaxtokens`, with
llama-server's spellings beside them (server/settings/cli.py). Kept apart so the settings model
stays readable; `HearthSettings` inherits them, so they are ordinary settings everywhere.

The projector is loaded with the model by server/core/llama/loading/media.py (llama.cpp's libmtmd).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from server.settings.flags import flags


class MediaFields(BaseModel):
    # KoboldCpp's --mmproj and llama-server's -mm / --mmproj.
    mmproj: str | None = Field(
        default=None,
        description="Multimodal projector GGUF (mmproj) that lets the model read images "
        "(or sounds) sent with a request.",
        json_schema_extra=flags("--mmproj", "-mm", metavar="FILE"),
    )
    # llama-server's --no-mmproj (KoboldCpp has no automatic projector to turn off).
    no_mmproj: bool = Field(
        default=False,
        description="No projector found for a model automatically: none downloaded with "
        "--hf, none paired beside a model of --modeldir (--mmproj still loads).",
        json_schema_extra=flags("--no-mmproj", "--no-mmproj-auto"),
    )
    # KoboldCpp's --mmprojcpu; llama-server's --no-mmproj-offload.
    mmprojcpu: bool = Field(
        default=False,
        description="Keep the projector on the CPU, off the GPU.",
        json_schema_extra=flags("--mmprojcpu", "--no-mmproj-offload"),
    )
    # KoboldCpp's --visionmintokens / --visionmaxtokens, llama-server's --image-min-tokens /
    # --image-max-tokens: the bounds on an image's tokens for projectors whose count depends
    # on the image (Qwen-VL and the like); -1: the projector's own.
    visionmintokens: int = Field(
        default=-1,
        ge=-1,
        le=65536,
        description="Fewest tokens per image; -1: the model's.",
        json_schema_extra=flags("--visionmintokens", "--image-min-tokens"),
    )
    visionmaxtokens: int = Field(
        default=-1,
        ge=-1,
        le=65536,
        description="Most tokens per image; -1: the model's.",
        json_schema_extra=flags("--visionmaxtokens", "--image-max-tokens"),
    )
    # Hearth's own (neither KoboldCpp nor llama-server fetches an image URL): the hosts whose
    # http(s) image URLs a request may name (server/dialects/media/remote_media.py). None, the
    # default: none is fetched, as a server that fetches any URL a client names can be made to
    # reach the machine's private network.
    remoteimages: list[str] | None = Field(
        default=None,
        description="Fetch the http(s) image URLs a request names from these hosts only: "
        "exact names, *.example.com for its subdomains, * for any public host; never a "
        "private address.",
        json_schema_extra=flags("--remoteimages", nargs="+", metavar="HOST"),
    )

    # llama-server's --media-path: the folder a request's `file://` image URLs are read from
    # (server/dialects/media/local_media.py); None: such URLs are refused.
    media_path: str | None = Field(
        default=None,
        description="Read a request's file:// media URLs from this folder (never outside "
        "it); without it they are refused.",
        json_schema_extra=flags("--media-path"),
    )

    @field_validator("mmproj", mode="before")
    @classmethod
    def _blank_projector_is_unset(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("remoteimages", mode="before")
    @classmethod
    def _host_list(cls, value: Any) -> Any:
        # A list, or one string "a.com, b.com" (a hand-written settings file, a flag's value);
        # [] is not set. IPv6 literals lose their brackets, as a URL's host has none.
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return value
        words = " ".join(str(item) for item in value).replace(",", " ").split()
        hosts = [word.strip("[]").rstrip(".").lower() for word in words]
        for host in hosts:
            wild = "*" in host and host != "*"
            if "/" in host or (wild and (not host.startswith("*.") or "*" in host[1:])):
                raise ValueError(f"{host!r} is not a host name (example.com, *.example.com or *)")
        return hosts or None
