"""Which request fields feed which sampling parameter, declared on the fields themselves.

A dialect's schema marks a field with `Samples("<SamplingParams field>")`:

    top_k: Annotated[int | None, Samples("top_k")] = None

and `sampling_from(body)` builds the core `SamplingParams` from every marked field a client
sent. A new sampling parameter is one field in `SamplingParams`, its use in the engine, and one
marked field in each dialect that has it: nothing else maps fields by hand.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace

from pydantic import BaseModel

from server.core.types import SamplingParams

_CORE_FIELDS = frozenset(f.name for f in fields(SamplingParams))


@dataclass(frozen=True, slots=True)
class Samples:
    """Marks a request field as the wire name of `SamplingParams.<core>`."""

    core: str

    def __post_init__(self) -> None:
        # A typo here would silently drop a client's setting: fail at import instead.
        if self.core not in _CORE_FIELDS:
            raise ValueError(f"SamplingParams has no field {self.core!r}")


@functools.cache
def sampling_fields(schema: type[BaseModel]) -> dict[str, str]:
    """`schema`'s marked fields: wire name → `SamplingParams` field name."""
    return {
        name: marker.core
        for name, info in schema.model_fields.items()
        for marker in info.metadata
        if isinstance(marker, Samples)
    }


KOBOLDCPP_SAMPLING = SamplingParams()  # KoboldCpp's defaults: every dialect's but Ollama's


def sampling_from(
    source: BaseModel, defaults: SamplingParams = KOBOLDCPP_SAMPLING
) -> SamplingParams:
    """`SamplingParams` from `source`'s marked fields; what a client omitted (None) keeps the
    dialect's `defaults`: KoboldCpp's unless the dialect's own server has others (Ollama's).

    Only declared (validated) fields are read: an unknown field of the same name, which the
    schemas accept unchecked, never reaches the engine."""
    given = {
        core: value
        for wire, core in sampling_fields(type(source)).items()
        if (value := getattr(source, wire)) is not None
    }
    return replace(defaults, **given)
