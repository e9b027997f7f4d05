"""The state of each model a server can serve, as llama-server's router lists it.

llama-server in router mode lists its models at GET /models, each with a `status` whose
`value` says where it stands: `loaded`, `loading`, `unloaded`, or `sleeping` (its
--sleep-idle-seconds put it away; the next request wakes it). Hearth's models are those of its
catalog (--modeldir, else the one served) and their states come from the scheduler's pool,
read without touching an engine, so asking never loads or wakes anything. Top level, so any
dialect's listing may show the same states.

Beside `data`, llama-server's /models and /v1/models carry `models`: one Ollama-like entry per
model, whose `capabilities` say "multimodal" when a projector was loaded with it (the rest are
llama-server's placeholders: it manages no model files, so no size, date or digest).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from typing_extensions import TypedDict

from server.core.scheduling.scheduler import Scheduler
from server.dialects.pipeline.model_choice import ModelChoice

ModelState = Literal["loaded", "loading", "unloaded", "sleeping"]


class ModelStatus(TypedDict):
    value: ModelState


class RouterModelEntry(TypedDict):
    """One model of GET /models, in llama-server's router shape (its OpenAI fields first)."""

    id: str
    object: Literal["model"]
    owned_by: str
    created: int  # the GGUF file's modification time (0 for a stand-in engine)
    aliases: list[str]
    tags: list[str]
    status: ModelStatus


class ListedModelDetails(TypedDict):
    parent_model: str
    format: Literal["gguf"]
    family: str
    families: list[str]
    parameter_size: str
    quantization_level: str


class ListedModel(TypedDict):
    """One model of the `models` list, in llama-server's Ollama-like shape."""

    name: str
    model: str
    modified_at: str
    size: str
    digest: str
    type: Literal["model"]
    description: str
    tags: list[str]
    capabilities: list[str]
    parameters: str
    details: ListedModelDetails


class RouterModelList(TypedDict):
    object: Literal["list"]
    data: list[RouterModelEntry]
    models: list[ListedModel]


def listed_model(public_name: str, path: Path | None, choice: ModelChoice) -> ListedModel:
    """`public_name`'s entry of the `models` list (llama-server's placeholders included)."""
    return {
        "name": public_name,
        "model": public_name,
        "modified_at": "",
        "size": "",
        "digest": "",
        "type": "model",
        "description": "",
        "tags": [""],
        "capabilities": capabilities(path, choice),
        "parameters": "",
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "",
            "families": [""],
            "parameter_size": "",
            "quantization_level": "",
        },
    }


def capabilities(path: Path | None, choice: ModelChoice) -> list[str]:
    """llama-server's: "completion", and "multimodal" when the model's projector takes
    images or sounds (the sole model of a server that cannot switch knows its own)."""
    if choice.sole is not None:
        modalities = choice.sole.modalities
    else:
        modalities = choice.modalities.get(path, frozenset()) if path else frozenset()
    return ["completion", "multimodal"] if modalities else ["completion"]


def model_states(scheduler: Scheduler) -> dict[str, ModelState]:
    """The state of every model that is not merely unloaded, by pool name (any thread)."""
    snapshot = scheduler.snapshot()
    states: dict[str, ModelState] = dict.fromkeys(scheduler.slept_models, "sleeping")
    states.update(dict.fromkeys(snapshot.loaded_models, "loaded"))
    if snapshot.loading_model is not None:
        states[snapshot.loading_model] = "loading"
    return states


def router_entry(
    name: str, path: Path | None, states: dict[str, ModelState], choice: ModelChoice
) -> RouterModelEntry:
    """`name`: the catalog's (the pool's key); the entry shows the public one (--alias)."""
    aliases, tags = choice.labels(name)
    return {
        "id": choice.public_name(name),
        "object": "model",
        "owned_by": "hearth",
        "created": _modified(path),
        "aliases": aliases,
        "tags": tags,
        "status": {"value": states.get(name, "unloaded")},
    }


def _modified(path: Path | None) -> int:
    """The file's modification time (a stat, no read); 0 without a file or when it is gone."""
    if path is None:
        return 0
    try:
        return int(path.stat().st_mtime)
    except OSError:
        return 0
