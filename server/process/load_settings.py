"""The edge between the settings model and the core: the fields loading a model reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from server.core.load_settings import LoadSettings
from server.settings.config import HearthSettings

T = TypeVar("T")


def _frozen(values: Sequence[T] | None) -> tuple[T, ...] | None:
    return None if values is None else tuple(values)


def load_settings(settings: HearthSettings) -> LoadSettings:
    return LoadSettings(
        contextsize=settings.contextsize,
        batch_size=settings.batch_size,
        thread_count=settings.thread_count,
        parallelrequests=settings.parallelrequests,
        gpulayers=settings.gpulayers,
        usecpu=settings.usecpu,
        usevulkan=_frozen(settings.usevulkan),
        usecuda=_frozen(settings.usecuda),
        cuda_device=settings.cuda_device,
        rpc=settings.rpc,
        tensor_split=_frozen(settings.tensor_split),
        noshift=settings.noshift,
        nofastforward=settings.nofastforward,
        cacheram_mib=settings.cacheram,
        smartcache=settings.smartcache,
        privatecache=settings.privatecache,
        cachedir=settings.cachedir,
        cachedisk_mib=settings.cachedisk,
    )
