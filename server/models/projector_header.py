"""What a multimodal projector (an mmproj GGUF, KoboldCpp's --mmproj) says it takes, from its
header alone: the `clip.*` keys llama.cpp's clip loader reads (tools/mtmd/clip.cpp,
`load_hparams`). A pure function over the metadata `gguf_summary` already parsed, so the
launcher can say "vision" / "audio" beside a model without loading llama.cpp.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the header reader imports numpy (via gguf); this module does not
    from server.models.gguf_header import MetadataValue

PROJECTOR_KEY_PREFIX = "clip."  # every projector key; a text model has none


@dataclass(frozen=True, slots=True)
class ProjectorFacts:
    vision: bool  # clip.has_vision_encoder: takes images
    audio: bool  # clip.has_audio_encoder: takes sounds
    projector_type: str  # "gemma3", "qwen2vl_merger", …; "" when the header does not say
    # The width of the embeddings it hands the text model, as the header states it
    # (clip.vision.projection_dim, else clip.audio.projection_dim). Informative only: llama.cpp
    # reads the real width from the projection tensor, and old LLaVA files state another.
    projection_dim: int | None

    @property
    def modalities(self) -> tuple[str, ...]:
        """What it adds to text, as llama-server's /props and Ollama's capabilities name it."""
        return tuple(name for name, has in (("vision", self.vision), ("audio", self.audio)) if has)


def projector_facts(metadata: Mapping[str, MetadataValue]) -> ProjectorFacts | None:
    """The projector's facts, or None when the header has no `clip.*` key (not a projector:
    a text model chosen by mistake, say). A key of the wrong type counts as absent, as
    llama.cpp's own optional reads do."""
    if not any(key.startswith(PROJECTOR_KEY_PREFIX) for key in metadata):
        return None

    def flag(key: str) -> bool:
        return metadata.get(key) is True  # a bool key; llama.cpp's default is false

    def width(modality: str) -> int | None:
        value = metadata.get(f"clip.{modality}.projection_dim")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    # Files that take both name each encoder's type apart (clip.vision.projector_type, …).
    kind = next(
        (
            value
            for key in (
                "clip.projector_type",
                "clip.vision.projector_type",
                "clip.audio.projector_type",
            )
            if isinstance(value := metadata.get(key), str) and value
        ),
        "",
    )
    return ProjectorFacts(
        vision=flag("clip.has_vision_encoder"),
        audio=flag("clip.has_audio_encoder"),
        projector_type=kind,
        projection_dim=width("vision") or width("audio"),
    )
