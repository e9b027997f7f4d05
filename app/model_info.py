"""The line under Quick Launch's model field: what the GGUF says about itself, and whether it
fits this machine's memory for the chosen context (read from the header, never loaded)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from server.base.defaults import DEFAULT_BATCH
from server.models.memory import available_memory, estimate_memory, mib


@dataclass(frozen=True)
class ModelInfo:
    text: str
    problem: bool  # shown as a warning: not a usable GGUF, or it will not fit


def describe_model(path: Path, context: int) -> ModelInfo:
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
