"""Where the model runs: threads, GPU layers, the backend (KoboldCpp's `usevulkan`, `usecuda`,
`usecpu`), llama-server's RPC workers and the split of layers between devices. Kept apart so
the settings model stays readable; `HearthSettings` inherits them, so they are ordinary
settings everywhere (command line, .kcpps, launcher). What uses them: server/devices/ and
server/core/llama/loading/devices.py.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator

from server.base.defaults import default_thread_count
from server.settings.flags import flags


class DeviceFields(BaseModel):
    threads: int = Field(
        default=-1,
        ge=-1,
        le=256,
        description="CPU threads; -1 or 0: auto.",
        json_schema_extra=flags("--threads"),
    )
    gpulayers: int = Field(
        default=-1,
        ge=-1,
        le=999,
        description="Layers to offload to a GPU (-1: as many as fit).",
        json_schema_extra=flags("--gpulayers"),
    )
    # KoboldCpp's backend choice. `usevulkan` is null (not chosen) or the device ids ([]: all).
    usevulkan: list[Annotated[int, Field(ge=0, le=63)]] | None = Field(
        default=None,
        description="Use the Vulkan backend, on these device ids (none: all).",
        json_schema_extra=flags("--usevulkan", nargs="*", int_items=True, metavar="ID"),
    )
    # KoboldCpp's `usecuda`: null, or its words ["normal"|"lowvram", "<device id>"|"all",
    # "mmq"|"nommq", "rowsplit"]; Hearth honours the device id and keeps the rest as written.
    usecuda: list[str] | None = Field(
        default=None,
        description="Use the CUDA backend ([normal] [device id]; none: all GPUs).",
        json_schema_extra=flags("--usecuda", nargs="*", metavar="WORD"),
    )
    usecpu: bool = Field(
        default=False,
        description="Run on the CPU only: offload nothing.",
        json_schema_extra=flags("--usecpu"),
    )
    # llama-server's --rpc (and its .kcpps key in KoboldCpp builds that have it): the devices of
    # `hearth rpc-worker`s elsewhere take layers as if they were local GPUs.
    rpc: str | None = Field(
        default=None,
        description="RPC workers (HOST:PORT[,HOST:PORT]) whose devices take layers.",
        json_schema_extra=flags("--rpc", metavar="HOST:PORT[,HOST:PORT]"),
    )
    # KoboldCpp's `tensor_split` (llama-server's --tensor-split): the share of the offloaded
    # layers each device takes, in llama.cpp's device order (RPC workers first, then GPUs).
    tensor_split: list[Annotated[float, Field(ge=0.0)]] | None = Field(
        default=None,
        description="Share of the layers per device (RPC workers, then GPUs); none: by free "
        "memory.",
        json_schema_extra=flags("--tensor_split", "--tensorsplit", nargs="+", metavar="SHARE"),
    )

    @property
    def cuda_device(self) -> int | None:
        """The device id in `usecuda` (KoboldCpp writes it as a string), if one is given."""
        return next((int(word) for word in self.usecuda or [] if word.isdigit()), None)

    @field_validator("tensor_split", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        # llama-server writes "3,1"; KoboldCpp a list ([3, 1]); [] or all zeros: not set.
        if isinstance(value, str):
            value = [part for part in value.replace(",", " ").split() if part]
        if isinstance(value, list):
            value = [part for item in value for part in _comma_parts(item)]
            if not value or all(float(part) == 0 for part in value):
                return None
        return value

    @property
    def thread_count(self) -> int:
        if self.threads > 0:
            return self.threads
        return default_thread_count()


def _comma_parts(item: Any) -> list[Any]:
    if isinstance(item, str):
        return [part for part in item.split(",") if part.strip()]
    return [item]
