"""The edge between the settings model and the core: the fields loading a model reads."""

from __future__ import annotations

from server.core.load_settings import LoadSettings
from server.settings.config import HearthSettings


def load_settings(settings: HearthSettings) -> LoadSettings:
    def frozen(values: list[int] | list[str] | list[float] | None) -> tuple | None:  # type: ignore[type-arg]
        return None if values is None else tuple(values)

    return LoadSettings(
        contextsize=settings.contextsize,
        batch_size=settings.batch_size,
        thread_count=settings.thread_count,
        parallelrequests=settings.parallelrequests,
        gpulayers=settings.gpulayers,
        usecpu=settings.usecpu,
        usevulkan=frozen(settings.usevulkan),
        usecuda=frozen(settings.usecuda),
        cuda_device=settings.cuda_device,
        rpc=settings.rpc,
        tensor_split=frozen(settings.tensor_split),
        noshift=settings.noshift,
        nofastforward=settings.nofastforward,
    )
