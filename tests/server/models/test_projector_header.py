"""`projector_facts`: what an mmproj GGUF's header says it takes (vision, audio), its type and
the width it projects to; None for a header that is no projector's."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.models.gguf import MetadataValue, gguf_summary
from server.models.projector_header import ProjectorFacts, projector_facts
from tests.support.projector_gguf import text_embedding_width, write_projector


def test_a_real_projector_s_header(bundled: Path, tmp_path: Path) -> None:
    """The tiny Gemma 3 projector the tests build, read through the header reader."""
    path = write_projector(tmp_path / "mmproj.gguf", bundled)
    facts = projector_facts(gguf_summary(path).metadata)
    assert facts == ProjectorFacts(
        vision=True,
        audio=False,
        projector_type="gemma3",
        projection_dim=text_embedding_width(bundled),  # 640, the bundled model's
    )
    assert facts.modalities == ("vision",)
    other = write_projector(tmp_path / "wide.gguf", bundled, n_embd=1024)
    assert projector_facts(gguf_summary(other).metadata) == ProjectorFacts(
        True, False, "gemma3", 1024
    )


def test_a_text_model_is_no_projector(bundled: Path) -> None:
    assert projector_facts(gguf_summary(bundled).metadata) is None
    assert projector_facts({}) is None
    assert projector_facts({"general.architecture": "clip", "general.type": "mmproj"}) is None


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        # Qwen2.5-Omni: both encoders, each type named apart, widths per modality.
        (
            {
                "clip.has_vision_encoder": True,
                "clip.has_audio_encoder": True,
                "clip.vision.projector_type": "qwen2.5o",
                "clip.audio.projector_type": "qwen2.5o",
                "clip.vision.projection_dim": 3584,
                "clip.audio.projection_dim": 3584,
            },
            ProjectorFacts(True, True, "qwen2.5o", 3584),
        ),
        # Voxtral / Ultravox: audio alone; the audio width when there is no vision one.
        (
            {
                "clip.has_audio_encoder": True,
                "clip.projector_type": "voxtral",
                "clip.audio.projection_dim": 3072,
            },
            ProjectorFacts(False, True, "voxtral", 3072),
        ),
        # An encoder flag that is false, absent, or not a bool takes nothing; a width that is
        # not a number is unknown; an empty type is no type.
        (
            {
                "clip.has_vision_encoder": 1,
                "clip.has_audio_encoder": False,
                "clip.projector_type": "",
                "clip.vision.projection_dim": True,
            },
            ProjectorFacts(False, False, "", None),
        ),
    ],
)
def test_what_the_keys_say(metadata: dict[str, MetadataValue], expected: ProjectorFacts) -> None:
    facts = projector_facts(metadata)
    assert facts == expected
    takes = [name for name, has in (("vision", expected.vision), ("audio", expected.audio)) if has]
    assert facts is not None and list(facts.modalities) == takes
