"""KoboldCpp's --gendefaults: generation fields a request leaves out, filled in from the
server's settings before its body is read (with --gendefaultsoverwrite, put over the request's
own), whichever API it speaks. `bodies.parse_json_body` calls it for every body, so every
generation route of every dialect gets the same rule.

A default's name is either a field of the request's own API (`stop_sequence`, `repeat_penalty`),
or a sampler as KoboldCpp names it (`temperature`, `top_k`, `top_p`, `min_p`, `rep_pen`,
`rep_pen_range`, `presence_penalty`, `frequency_penalty`, `seed`), which sets the field every
API marks for that sampler (dialects/edge/sampling.py), or one of the names of the reply's length
(`max_length`, `max_tokens`, `n_predict`, `num_predict`, …), which sets the API's own. Nested
options (Ollama's `options`) are the request's fields too. A body with no sampler field (a
tokenizer's, an embedding's) is left alone.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from server.dialects.edge.sampling import sampling_fields

# Every API's name for the number of tokens to generate.
MAX_LENGTH_NAMES = (
    "max_length",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "n_predict",
    "num_predict",
)


def with_generation_defaults(
    data: dict[str, Any], schema: type[BaseModel], defaults: Mapping[str, Any], overwrite: bool
) -> dict[str, Any]:
    """`data` (a body as parsed JSON, for `schema`) with the defaults in; `data` itself when
    none applies, so a caller can tell."""
    if not defaults:
        return data
    merged = _filled(data, schema, defaults, overwrite)
    for name, inner in _nested_schemas(schema):
        given = data.get(name)
        if given is None or isinstance(given, dict):
            filled = _filled(given or {}, inner, defaults, overwrite)
            if filled != (given or {}):
                merged = {**merged, name: filled}
    return merged


def _filled(
    data: dict[str, Any], schema: type[BaseModel], defaults: Mapping[str, Any], overwrite: bool
) -> dict[str, Any]:
    if not sampling_fields(schema):
        return data
    result = data
    for key, value in defaults.items():
        names = _field_names(schema, key)
        if names and (overwrite or not any(name in data for name in names)):
            result = {**result, **dict.fromkeys(names, value)}
    return result


@functools.cache
def _field_names(schema: type[BaseModel], key: str) -> tuple[str, ...]:
    """The fields of `schema` a default named `key` sets."""
    marked = sampling_fields(schema)  # wire name → sampler
    sampler = marked.get(key, key)  # a field of this API stands for its sampler
    names = {wire for wire, core in marked.items() if core == sampler}
    if key in schema.model_fields:
        names.add(key)
    if key in MAX_LENGTH_NAMES:
        names.update(name for name in MAX_LENGTH_NAMES if name in schema.model_fields)
    return tuple(sorted(names))


@functools.cache
def _nested_schemas(schema: type[BaseModel]) -> tuple[tuple[str, type[BaseModel]], ...]:
    """Fields holding an object of sampler fields of their own (Ollama's `options`)."""
    nested = []
    for name, info in schema.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel) and sampling_fields(kind):
            nested.append((name, kind))
    return tuple(nested)
