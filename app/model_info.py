"""The line under Quick Launch's model field: what the GGUF says about itself (with "vision" or
"audio" when its projector takes them), and whether it fits this machine's memory for the chosen
context; and the line under Loaded Files' projector field. All read from headers, never loaded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from server.base.defaults import DEFAULT_BATCH
from server.models.memory import MIB, available_memory, estimate_memory, mib
from server.models.projector_header import projector_facts


@dataclass(frozen=True)
class ModelInfo:
    text: str
    problem: bool  # shown as a warning: not a usable GGUF, or it will not fit


@dataclass(frozen=True)
class ProjectorInfo:
    text: str  # the note under the projector field
    problem: bool  # shown as a warning: missing, unreadable, or not a projector
    modalities: tuple[str, ...] = ()  # what it adds to text; empty when it is not usable
    file_size: int = 0  # its weights, as llama.cpp loads them (0 when it is not usable)


def describe_projector(path: Path) -> ProjectorInfo:
    """What the projector (mmproj) file says it takes, or a short warning."""
    from server.models.gguf import GGUFFormatError, gguf_summary

    if not path.is_file():
        return ProjectorInfo("No such file.", True)
    try:
        summary = gguf_summary(path)
    except GGUFFormatError as exc:
        return ProjectorInfo(f"Not a usable GGUF: {exc}", True)
    except OSError as exc:
        return ProjectorInfo(f"Cannot read the file: {exc.strerror or exc}", True)
    facts = projector_facts(summary.metadata)
    if facts is None:
        return ProjectorInfo(
            "Not a projector (no clip.* keys): choose the model's mmproj file.", True
        )
    if not facts.modalities:
        return ProjectorInfo("This projector says it takes neither images nor audio.", True)
    kind = f"{facts.projector_type} projector" if facts.projector_type else "projector"
    size = summary.file_size
    weights = mib(size) if size >= MIB else f"{size / 1024:,.0f} KiB"  # tiny test projectors
    shown = " · ".join((*facts.modalities, kind, weights))
    return ProjectorInfo(shown, False, facts.modalities, summary.file_size)


def describe_model(path: Path, context: int, projector: Path | None = None) -> ModelInfo:
    """`projector`: the Loaded Files tab's mmproj; what it takes shows among the facts."""
    from server.models.gguf import GGUFFormatError, gguf_summary

    try:
        summary = gguf_summary(path)
    except GGUFFormatError as exc:
        return ModelInfo(f"Not a usable GGUF: {exc}", True)
    except OSError as exc:
        return ModelInfo(f"Cannot read the file: {exc.strerror or exc}", True)
    trained = summary.context_length
    facts = [
        summary.architecture or "unknown architecture",
        f"{summary.parameter_size} parameters" if summary.parameter_size else "",
        summary.quantization,
        f"trained context {trained}" if trained else "",
        "chat template" if summary.chat_template else "no chat template (a base model?)",
        *(describe_projector(projector).modalities if projector is not None else ()),
        mib(summary.file_size),
    ]
    text = " · ".join(fact for fact in facts if fact)
    needed = estimate_memory(summary, context, DEFAULT_BATCH).cpu_bytes
    free = available_memory()
    memory = f"Needs about {mib(needed)} for a {context}-token context"
    if free is None:
        return ModelInfo(f"{text}\n{memory}.", False)
    if needed > free:
        return ModelInfo(
            f"{text}\n{memory}, more than the {mib(free)} free: offload layers to a GPU or "
            "choose a smaller context.",
            True,
        )
    too_long = trained is not None and context > trained
    note = f" (longer than the {trained} it was trained for)" if too_long else ""
    return ModelInfo(f"{text}\n{memory}{note}; {mib(free)} free.", False)
