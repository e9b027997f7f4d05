"""LoRA adapters on the loaded model (KoboldCpp's --lora, llama-server's --lora and
--lora-scaled): loaded after the model and checked to be adapters for it, applied to the
context at each request's scales, freed before the model.

llama.cpp applies adapters to a whole context, not to a sequence, so sequences whose scales
differ cannot share a decode: as llama-server batches only slots whose LoRA configuration is
equal, `turn` picks the sequences of one configuration for each decode (the configuration
served longest ago, so that every one advances) and sets it on the context. Scales of 0 are
left out of a configuration, as llama.cpp leaves them out: a request at scale 0 is the model
alone and batches with requests that use no adapter.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import llama_cpp as llama

from server.core.load_settings import LoraSettings
from server.core.scheduling.engine import EngineError
from server.core.types import GenerationRequest
from server.models.gguf import gguf_summary
from server.models.gguf_header import GGUFFormatError

logger = logging.getLogger(__name__)

# The adapters a request runs with: (adapter id, scale) pairs by id, none at scale 0.
Scales = tuple[tuple[int, float], ...]


class _Requested(Protocol):
    @property
    def request(self) -> GenerationRequest: ...


S = TypeVar("S", bound=_Requested)


class LoraAdapters:
    """The model's LoRA adapters (none: every method is a no-op) and the configuration set on
    its context. Used by the generation thread alone."""

    def __init__(
        self, context: Any, handles: list[Any] | None = None, settings: LoraSettings | None = None
    ) -> None:
        self._context = context
        self._handles = handles or []
        self._settings = settings or LoraSettings()
        self._applied: Scales = ()  # what the context has now (a new context has none)
        self._served: dict[Scales, int] = {}  # each configuration's last decode, by number
        self._decodes = 0

    @classmethod
    def load(
        cls, model: Any, context: Any, model_path: Path, settings: LoraSettings
    ) -> LoraAdapters:
        """Load every adapter `settings` names onto `model`; EngineError (with none of them
        left loaded) for a file that is not a LoRA adapter for this model."""
        handles: list[Any] = []
        try:
            for name in settings.paths:
                path = Path(name).expanduser()
                _check_adapter(path, model_path)
                handle = llama.llama_adapter_lora_init(model, str(path).encode())
                if not handle:  # llama.cpp logged why (its error lines reach the console)
                    raise EngineError(
                        f"--lora {path}: llama.cpp could not apply it to {model_path.name} "
                        "(its tensors do not match this model's: a LoRA made for another model?)"
                    )
                handles.append(handle)
        except EngineError:
            for handle in handles:
                llama.llama_adapter_lora_free(handle)
            raise
        for name, scale in zip(settings.paths, settings.scales, strict=False):
            logger.info("LoRA adapter %s at scale %g", Path(name).name, scale)
        return cls(context, handles, settings)

    def free(self) -> None:
        """Before the model is freed (which would free them too) and after the context."""
        for handle in self._handles:
            llama.llama_adapter_lora_free(handle)
        self._handles = []

    def resolved(self, request: GenerationRequest) -> GenerationRequest:
        """`request` with the scales it runs at spelled out: its own (an adapter it does not
        name at 0, as llama-server's per-request `lora`; ids this model lacks ignored, as
        there), else the server's now. The same request when nothing changes."""
        if not self._handles:
            return request
        given = enumerate(tuple(self._settings.scales)) if request.lora is None else request.lora
        chosen = dict(given)  # a later entry for one id wins
        count = len(self._handles)
        scales = tuple(
            (index, float(scale))
            for index, scale in sorted(chosen.items())
            if 0 <= index < count and scale != 0
        )
        return request if scales == request.lora else replace(request, lora=scales)

    def cache_key(self, request: GenerationRequest) -> str:
        """What KV states computed for `request` (resolved) hold besides its tokens: its
        adapters' files and scales ("" for the model alone), so that a cache made under other
        scales is never reused."""
        return ";".join(f"{self._settings.paths[i]}*{scale!r}" for i, scale in request.lora or ())

    def turn(self, active: list[S]) -> list[S]:
        """The sequences of the next decode, with their configuration set on the context: all
        of them when they share one (always, without adapters), else those of the one served
        longest ago (on a tie, the one of the sequence that started first), so that every one
        advances. Switching costs nothing measurable: the time of the decode after a switch
        is that of the next one (the compute graph is reserved again, cheaply)."""
        if not self._handles:
            return active
        groups: dict[Scales, list[S]] = {}
        for sequence in active:
            groups.setdefault(sequence.request.lora or (), []).append(sequence)
        if not groups:
            return active
        chosen = min(groups, key=lambda scales: self._served.get(scales, -1))
        self._decodes += 1
        # Configurations no sequence has any more are forgotten.
        self._served = {scales: self._served.get(scales, -1) for scales in groups}
        self._served[chosen] = self._decodes
        self._apply(chosen)
        return active if len(groups) == 1 else groups[chosen]

    def _apply(self, scales: Scales) -> None:
        if scales == self._applied:
            return
        count = len(scales)
        adapters = (llama.llama_adapter_lora_p_ctypes * count)(
            *(self._handles[index] for index, _scale in scales)
        )
        values = (ctypes.c_float * count)(*(scale for _index, scale in scales))
        llama.llama_set_adapters_lora(
            self._context, adapters if count else None, count, values if count else None
        )
        self._applied = scales


def _check_adapter(path: Path, model_path: Path) -> None:
    """EngineError saying why `path` is not a LoRA adapter for the model at `model_path`, as
    far as the headers tell (llama.cpp then checks each tensor's shape)."""
    flag = f"--lora {path}"
    if not path.is_file():
        raise EngineError(f"{flag}: no such file")
    try:
        adapter = gguf_summary(path)
        model = gguf_summary(model_path)
    except (GGUFFormatError, OSError) as exc:
        raise EngineError(f"{flag}: {exc}") from None
    kind = (adapter.metadata.get("general.type"), adapter.metadata.get("adapter.type"))
    if kind != ("adapter", "lora"):
        raise EngineError(
            f"{flag}: not a LoRA adapter (general.type {kind[0]!r}, adapter.type {kind[1]!r}; "
            "a LoRA GGUF has 'adapter' and 'lora')"
        )
    if adapter.architecture != model.architecture:
        raise EngineError(
            f"{flag}: a LoRA adapter for {adapter.architecture or 'another'} models, and "
            f"{model_path.name} is a {model.architecture} model"
        )
